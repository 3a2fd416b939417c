# Amazon DocumentDB (5.0, MongoDB-compatible) for metalake's control plane and tenants' projections. What metalake
# asks of MongoDB, and whether DocumentDB has it, is listed in docs/deploy.md#mongodb-documentdb-or-atlas: all of it,
# provided the URI sets retryWrites=false (DocumentDB has no retryable writes). TLS required, storage under the
# platform's key, audit and profiler logs exported, backups kept `backup_retention_days`.

terraform {
  required_version = ">= 1.6"
  required_providers {
    aws    = { source = "hashicorp/aws", version = ">= 5.60" }
    random = { source = "hashicorp/random", version = ">= 3.5" }
  }
}

resource "aws_security_group" "docdb" {
  name        = "${var.name}-docdb"
  description = "DocumentDB: from the cluster's nodes only"
  vpc_id      = var.vpc_id
  tags        = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "docdb" {
  security_group_id            = aws_security_group.docdb.id
  description                  = "MongoDB wire protocol over TLS from the EKS nodes"
  referenced_security_group_id = var.client_security_group_id
  from_port                    = 27017
  to_port                      = 27017
  ip_protocol                  = "tcp"
}

resource "aws_docdb_subnet_group" "this" {
  name       = var.name
  subnet_ids = var.subnet_ids
  tags       = var.tags
}

resource "aws_docdb_cluster_parameter_group" "this" {
  family = "docdb5.0"
  name   = "${var.name}-metalake"
  parameter {
    name  = "tls"
    value = "enabled"
  }
  parameter {
    name  = "audit_logs"
    value = "enabled"
  }
  parameter {
    name  = "profiler"
    value = "enabled"
  }
  # TTL indexes expire the delivery ledgers and webhook deliveries (metalake/expiry.py): once a minute is enough.
  parameter {
    name  = "ttl_monitor"
    value = "enabled"
  }
  tags = var.tags
}

resource "random_password" "master" {
  length  = 40
  special = false
}

resource "aws_docdb_cluster" "this" {
  cluster_identifier              = var.name
  engine                          = "docdb"
  engine_version                  = "5.0.0"
  master_username                 = "metalake_admin"
  master_password                 = random_password.master.result
  db_subnet_group_name            = aws_docdb_subnet_group.this.name
  vpc_security_group_ids          = [aws_security_group.docdb.id]
  db_cluster_parameter_group_name = aws_docdb_cluster_parameter_group.this.name
  storage_encrypted               = true
  kms_key_id                      = var.kms_key_arn
  backup_retention_period         = var.backup_retention_days
  preferred_backup_window         = "02:00-03:00"
  deletion_protection             = true
  skip_final_snapshot             = false
  final_snapshot_identifier       = "${var.name}-final"
  enabled_cloudwatch_logs_exports = ["audit", "profiler"]
  tags                            = var.tags
}

resource "aws_docdb_cluster_instance" "this" {
  count                      = var.instances
  identifier                 = "${var.name}-${count.index}"
  cluster_identifier         = aws_docdb_cluster.this.id
  instance_class             = var.instance_class
  auto_minor_version_upgrade = true
  tags                       = var.tags
}

resource "aws_secretsmanager_secret" "master" {
  #checkov:skip=CKV2_AWS_57:The master user is for the operator's first login only; metalake's own user is created by hand and its URI kept in the Kubernetes Secret (docs/deploy.md#aws)
  name       = "${var.name}-docdb-master"
  kms_key_id = var.kms_key_arn
  tags       = var.tags
}

resource "aws_secretsmanager_secret_version" "master" {
  secret_id     = aws_secretsmanager_secret.master.id
  secret_string = jsonencode({ username = aws_docdb_cluster.this.master_username, password = random_password.master.result, host = aws_docdb_cluster.this.endpoint })
}
