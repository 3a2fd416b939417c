# IAM roles for service accounts, one per metalake process, each allowed exactly the S3 calls its code makes on the
# lake (as control/kafka_acls.py derives each process's Kafka ACLs; the table with the code behind each line is in
# docs/deploy.md#s3-access-per-process), plus KMS use of the lake's key through S3 only. Processes that never touch
# the lake (propagation, outbound, access) get no role at all. A dedicated tenant's job gets a role limited to its
# own folder.

terraform {
  required_version = ">= 1.6"
  required_providers {
    aws = { source = "hashicorp/aws", version = ">= 5.60" }
  }
}

locals {
  bucket_arn = "arn:aws:s3:::${var.bucket}"
  root       = trim(var.prefix, "/")
  all        = "${local.bucket_arn}/${local.root}/*"
  # process => [actions on objects, object ARNs, list prefixes]
  access = {
    # Provisioning creates a tenant's Delta tables and deprovisioning deletes its folder (delta-rs, metalake/s3.py);
    # audit rows (delta-rs appends); dead-letter and audit listings read Delta.
    api = { actions = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], objects = [local.all], list = ["${local.root}/*"] }
    # Audit rows of the connectors' API calls only: every tenant's audit table and the platform's.
    connect = {
      actions = ["s3:GetObject", "s3:PutObject"]
      objects = ["${local.bucket_arn}/${local.root}/*/audit/*"]
      list    = ["${local.root}/*"]
    }
    # Every pooled table and every dedicated tenant's: MERGE, append; s3a deletes the directory markers it finds.
    stream = { actions = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], objects = [local.all], list = ["${local.root}/*"] }
    # Erasures rewrite and purge files, maintain compacts and vacuums.
    "lake-worker" = { actions = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], objects = [local.all], list = ["${local.root}/*"] }
  }
  dedicated = {
    for t in var.dedicated_tenants : "stream-${t}" => {
      actions = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
      objects = ["${local.bucket_arn}/${local.root}/${t}/*"]
      list    = ["${local.root}/${t}/*"]
    }
  }
  roles = merge(local.access, local.dedicated)
  service_accounts = merge(
    { for p in keys(local.access) : p => "${var.release}-${p}" },
    { for t in var.dedicated_tenants : "stream-${t}" => "${var.release}-${t}-stream" },
  )
  oidc_host = replace(var.oidc_issuer, "https://", "")
}

data "aws_iam_policy_document" "assume" {
  for_each = local.roles
  statement {
    actions = ["sts:AssumeRoleWithWebIdentity"]
    principals {
      type        = "Federated"
      identifiers = [var.oidc_provider_arn]
    }
    condition {
      test     = "StringEquals"
      variable = "${local.oidc_host}:sub"
      values   = ["system:serviceaccount:${var.namespace}:${local.service_accounts[each.key]}"]
    }
    condition {
      test     = "StringEquals"
      variable = "${local.oidc_host}:aud"
      values   = ["sts.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "s3" {
  for_each = local.roles
  statement {
    sid       = "ListItsPrefixes"
    actions   = ["s3:ListBucket"]
    resources = [local.bucket_arn]
    # IfExists: HeadBucket (the readiness checks' probe of the bucket, metalake/http/health.py) carries no prefix. A
    # dedicated tenant's job serves no health check, so its role lists its own folder only.
    condition {
      test     = startswith(each.key, "stream-") ? "StringLike" : "StringLikeIfExists"
      variable = "s3:prefix"
      values   = each.value.list
    }
  }
  statement {
    sid       = "Objects"
    actions   = each.value.actions
    resources = each.value.objects
  }
  statement {
    sid       = "LakeKeyThroughS3"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [var.kms_key_arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["s3.${var.region}.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "this" {
  for_each           = local.roles
  name               = "${var.name}-${each.key}"
  assume_role_policy = data.aws_iam_policy_document.assume[each.key].json
  tags               = var.tags
}

resource "aws_iam_role_policy" "s3" {
  for_each = local.roles
  name     = "lake"
  role     = aws_iam_role.this[each.key].id
  policy   = data.aws_iam_policy_document.s3[each.key].json
}
