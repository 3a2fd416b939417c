# The pooled platform: one VPC, MSK, the lake's bucket, EKS with its three node groups, DocumentDB, Trino, and a role
# per metalake process. Then: the Kubernetes Secrets and `helm install` of deploy/helm/metalake with
# examples/pooled.yaml (docs/deploy.md#aws). Backend: an S3 bucket with locking of your own (not created here).

terraform {
  required_version = ">= 1.6"
  required_providers {
    aws        = { source = "hashicorp/aws", version = ">= 5.60" }
    helm       = { source = "hashicorp/helm", version = ">= 2.12" }
    random     = { source = "hashicorp/random", version = ">= 3.5" }
    tls        = { source = "hashicorp/tls", version = ">= 4.0" }
    kubernetes = { source = "hashicorp/kubernetes", version = ">= 2.30" }
  }
}

provider "aws" {
  region = var.region
  default_tags {
    tags = { project = "metalake", environment = var.name }
  }
}

provider "helm" {
  kubernetes {
    host                   = module.eks.cluster_endpoint
    cluster_ca_certificate = base64decode(module.eks.cluster_ca)
    exec {
      api_version = "client.authentication.k8s.io/v1beta1"
      command     = "aws"
      args        = ["eks", "get-token", "--cluster-name", module.eks.cluster_name, "--region", var.region]
    }
  }
}

provider "kubernetes" {
  host                   = module.eks.cluster_endpoint
  cluster_ca_certificate = base64decode(module.eks.cluster_ca)
  exec {
    api_version = "client.authentication.k8s.io/v1beta1"
    command     = "aws"
    args        = ["eks", "get-token", "--cluster-name", module.eks.cluster_name, "--region", var.region]
  }
}

module "kms" {
  source = "../../modules/kms"
  name   = var.name
  region = var.region
}

module "network" {
  source      = "../../modules/network"
  name        = var.name
  region      = var.region
  zones       = [for z in ["a", "b", "c"] : "${var.region}${z}"]
  kms_key_arn = module.kms.key_arn
}

module "eks" {
  source      = "../../modules/eks"
  name        = var.name
  vpc_id      = module.network.vpc_id
  subnet_ids  = module.network.private_subnet_ids
  kms_key_arn = module.kms.key_arn
  node_groups = var.node_groups
}

module "msk" {
  source                   = "../../modules/msk"
  name                     = var.name
  vpc_id                   = module.network.vpc_id
  subnet_ids               = module.network.private_subnet_ids
  client_security_group_id = module.eks.node_security_group_id
  kms_key_arn              = module.kms.key_arn
  broker_instance_type     = var.msk_broker_instance_type
  enforce_acls             = var.msk_enforce_acls
}

module "lake" {
  source      = "../../modules/s3-lake"
  bucket      = var.lake_bucket
  kms_key_arn = module.kms.key_arn
}

module "documentdb" {
  source                   = "../../modules/documentdb"
  name                     = var.name
  vpc_id                   = module.network.vpc_id
  subnet_ids               = module.network.private_subnet_ids
  client_security_group_id = module.eks.node_security_group_id
  kms_key_arn              = module.kms.key_arn
  instance_class           = var.documentdb_instance_class
}

module "irsa" {
  source            = "../../modules/irsa"
  name              = var.name
  region            = var.region
  bucket            = module.lake.bucket
  kms_key_arn       = module.kms.key_arn
  oidc_provider_arn = module.eks.oidc_provider_arn
  oidc_issuer       = module.eks.oidc_issuer
  dedicated_tenants = var.dedicated_tenants
}

module "trino" {
  source            = "../../modules/trino"
  name              = var.name
  region            = var.region
  bucket            = module.lake.bucket
  kms_key_arn       = module.kms.key_arn
  oidc_provider_arn = module.eks.oidc_provider_arn
  oidc_issuer       = module.eks.oidc_issuer
  api_issuer        = var.api_issuer
  workers           = var.trino_workers
}

output "kafka_bootstrap_servers" {
  value = module.msk.bootstrap_brokers_sasl_scram
}

output "documentdb_endpoint" {
  value = module.documentdb.endpoint
}

output "lake_root" {
  value = "s3a://${module.lake.bucket}/lake"
}

output "role_arns" {
  description = "For the chart's serviceAccounts.roleArns."
  value       = module.irsa.role_arns
}

output "efs_id" {
  value = module.eks.efs_id
}
