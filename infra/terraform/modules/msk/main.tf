# Amazon MSK for metalake: three brokers in the private subnets, TLS between clients and brokers and between brokers,
# SASL/SCRAM-SHA-512 with one user per process kind (metalake's clients are librdkafka and the Java client; neither
# signs MSK IAM tokens through metalake's settings, so IAM access control is not offered here), the storage and the
# SCRAM secrets under the platform's key, ACLs enforced once `metalake kafka acls --apply` has run
# (docs/deploy.md#aws), broker logs kept in CloudWatch.

terraform {
  required_version = ">= 1.6"
  required_providers {
    aws    = { source = "hashicorp/aws", version = ">= 5.60" }
    random = { source = "hashicorp/random", version = ">= 3.5" }
  }
}

resource "aws_security_group" "msk" {
  name        = "${var.name}-msk"
  description = "MSK brokers: SASL/SCRAM over TLS from the cluster's nodes only"
  vpc_id      = var.vpc_id
  tags        = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "scram" {
  security_group_id            = aws_security_group.msk.id
  description                  = "SASL_SSL (SCRAM) from the EKS nodes"
  referenced_security_group_id = var.client_security_group_id
  from_port                    = 9096
  to_port                      = 9096
  ip_protocol                  = "tcp"
}

resource "aws_msk_configuration" "this" {
  name           = "${var.name}-metalake"
  kafka_versions = [var.kafka_version]
  # metalake's platform topics are created at install (docs/production.md#kafka), tenants' by provisioning under
  # ACLs: nothing is created by a client's first use. Replication 3, min.insync 2: one broker may be down.
  server_properties = <<-PROPS
    auto.create.topics.enable=false
    default.replication.factor=3
    min.insync.replicas=2
    num.partitions=6
    allow.everyone.if.no.acl.found=${var.enforce_acls ? "false" : "true"}
  PROPS
}

resource "aws_msk_cluster" "this" {
  cluster_name           = var.name
  kafka_version          = var.kafka_version
  number_of_broker_nodes = 3
  enhanced_monitoring    = "PER_TOPIC_PER_BROKER"

  broker_node_group_info {
    instance_type   = var.broker_instance_type
    client_subnets  = var.subnet_ids
    security_groups = [aws_security_group.msk.id]
    storage_info {
      ebs_storage_info {
        volume_size = var.broker_volume_gb
      }
    }
    connectivity_info {
      public_access {
        type = "DISABLED"
      }
    }
  }

  client_authentication {
    unauthenticated = false
    sasl {
      scram = true
    }
  }

  encryption_info {
    encryption_at_rest_kms_key_arn = var.kms_key_arn
    encryption_in_transit {
      client_broker = "TLS"
      in_cluster    = true
    }
  }

  configuration_info {
    arn      = aws_msk_configuration.this.arn
    revision = aws_msk_configuration.this.latest_revision
  }

  logging_info {
    broker_logs {
      cloudwatch_logs {
        enabled   = true
        log_group = aws_cloudwatch_log_group.brokers.name
      }
    }
  }

  tags = var.tags
}

resource "aws_cloudwatch_log_group" "brokers" {
  name              = "/metalake/${var.name}/msk"
  retention_in_days = 365
  kms_key_id        = var.kms_key_arn
  tags              = var.tags
}

# One SCRAM user per principal of `metalake kafka acls` (METALAKE_KAFKA__PRINCIPALS__*) plus the administrator that
# applies the ACLs. MSK reads the secrets only if named AmazonMSK_* and encrypted with a customer-managed key.
resource "random_password" "scram" {
  for_each = toset(var.principals)
  length   = 40
  special  = false
}

resource "aws_secretsmanager_secret" "scram" {
  #checkov:skip=CKV2_AWS_57:MSK SCRAM secrets cannot rotate automatically: a rotation is a new password the pods must be given at the same time (docs/deploy.md#rotating-kafka-passwords)
  for_each   = toset(var.principals)
  name       = "AmazonMSK_${var.name}_${each.key}"
  kms_key_id = var.kms_key_arn
  tags       = var.tags
}

resource "aws_secretsmanager_secret_version" "scram" {
  for_each      = toset(var.principals)
  secret_id     = aws_secretsmanager_secret.scram[each.key].id
  secret_string = jsonencode({ username = each.key, password = random_password.scram[each.key].result })
}

resource "aws_msk_scram_secret_association" "this" {
  cluster_arn     = aws_msk_cluster.this.arn
  secret_arn_list = [for s in aws_secretsmanager_secret.scram : s.arn]
  depends_on      = [aws_secretsmanager_secret_version.scram]
}
