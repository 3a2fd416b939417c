# Trino on EKS (the trinodb/trino chart) on the tainted `trino` node group, reading the lake through its native S3
# file system with a role of its own (IRSA: read everything under the lake root, write only the file metastore), its
# `lake` catalog, JWT and access-control lines taken from metalake's chart (ConfigMap <release>-trino-config,
# deploy/helm/metalake/templates/trino-config.yaml) and the access processor's rules file from the shared EFS claim.

terraform {
  required_version = ">= 1.6"
  required_providers {
    aws  = { source = "hashicorp/aws", version = ">= 5.60" }
    helm = { source = "hashicorp/helm", version = ">= 2.12" }
  }
}

locals {
  bucket_arn = "arn:aws:s3:::${var.bucket}"
  root       = trim(var.prefix, "/")
  oidc_host  = replace(var.oidc_issuer, "https://", "")
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRoleWithWebIdentity"]
    principals {
      type        = "Federated"
      identifiers = [var.oidc_provider_arn]
    }
    condition {
      test     = "StringEquals"
      variable = "${local.oidc_host}:sub"
      values   = ["system:serviceaccount:${var.namespace}:trino"]
    }
    condition {
      test     = "StringEquals"
      variable = "${local.oidc_host}:aud"
      values   = ["sts.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "s3" {
  statement {
    sid       = "List"
    actions   = ["s3:ListBucket"]
    resources = [local.bucket_arn]
    condition {
      test     = "StringLikeIfExists"
      variable = "s3:prefix"
      values   = ["${local.root}/*"]
    }
  }
  statement {
    sid       = "ReadTheLake"
    actions   = ["s3:GetObject"]
    resources = ["${local.bucket_arn}/${local.root}/*"]
  }
  statement {
    sid       = "WriteItsMetastore"
    actions   = ["s3:PutObject", "s3:DeleteObject"]
    resources = ["${local.bucket_arn}/${local.root}/_trino_metastore/*"]
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

resource "aws_iam_role" "trino" {
  name               = "${var.name}-trino"
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = var.tags
}

resource "aws_iam_role_policy" "trino" {
  name   = "lake"
  role   = aws_iam_role.trino.id
  policy = data.aws_iam_policy_document.s3.json
}

resource "helm_release" "trino" {
  name             = "trino"
  namespace        = var.namespace
  create_namespace = true
  repository       = "https://trinodb.github.io/charts"
  chart            = "trino"
  version          = var.chart_version
  values = [yamlencode({
    image          = { tag = var.trino_version }
    serviceAccount = { create = true, name = "trino", annotations = { "eks.amazonaws.com/role-arn" = aws_iam_role.trino.arn } }
    server = {
      workers = var.workers
      config  = { https = { enabled = true, port = 8443, keystore = { path = "/etc/trino/tls/keystore.pem" } } }
    }
    coordinator = {
      tolerations  = [{ key = "metalake.io/pool", value = "trino", effect = "NoSchedule" }]
      nodeSelector = { "metalake.io/pool" = "trino" }
      additionalVolumes = [
        { name = "metalake", configMap = { name = "${var.metalake_release}-trino-config" } },
        { name = "rules", persistentVolumeClaim = { claimName = var.rules_claim } },
      ]
      additionalVolumeMounts = [
        { name = "metalake", mountPath = "/etc/trino/metalake" },
        { name = "rules", mountPath = "/var/lib/metalake/trino-rules", readOnly = true },
      ]
    }
    worker = {
      tolerations  = [{ key = "metalake.io/pool", value = "trino", effect = "NoSchedule" }]
      nodeSelector = { "metalake.io/pool" = "trino" }
    }
  })]
}
