# Trino on EKS (the trinodb/trino chart) on the tainted `trino` node group, reading the lake through its native S3
# file system with a role of its own (IRSA: read everything under the lake root, write only the file metastore). Its
# `lake` catalog, JWT and access-control lines are the ones metalake's chart renders into <release>-trino-config
# (deploy/helm/metalake/templates/trino-config.yaml; tests/integration/deploy checks that both say the same), and the
# access processor's rules file comes from the shared EFS claim.

terraform {
  required_version = ">= 1.6"
  required_providers {
    aws        = { source = "hashicorp/aws", version = ">= 5.60" }
    helm       = { source = "hashicorp/helm", version = ">= 2.12" }
    kubernetes = { source = "hashicorp/kubernetes", version = ">= 2.30" }
  }
}

locals {
  bucket_arn = "arn:aws:s3:::${var.bucket}"
  root       = trim(var.prefix, "/")
  oidc_host  = replace(var.oidc_issuer, "https://", "")
  lake_catalog = join("\n", [
    "connector.name=delta_lake",
    "hive.metastore=file",
    "hive.metastore.catalog.dir=s3://${var.bucket}/${local.root}/_trino_metastore",
    "fs.native-s3.enabled=true",
    "s3.region=${var.region}",
    "s3.path-style-access=false",
    "delta.register-table-procedure.enabled=true",
    "delta.enable-non-concurrent-writes=true",
  ])
  coordinator_properties = [
    "http-server.authentication.type=PASSWORD,JWT",
    "http-server.authentication.jwt.key-file=${trimsuffix(var.api_issuer, "/")}/.well-known/jwks.json",
    "http-server.authentication.jwt.required-issuer=${var.api_issuer}",
    "http-server.authentication.jwt.required-audience=metalake-api",
    "http-server.authentication.jwt.principal-field=trino_user",
    "access-control.config-files=/etc/trino/metalake/access-control.properties",
  ]
  access_control = join("\n", [
    "access-control.name=file",
    "security.config-file=/var/lib/metalake/trino-rules/rules.json",
    "security.refresh-period=1s",
  ])
}

resource "kubernetes_config_map" "metalake" {
  metadata {
    name      = "metalake-access-control"
    namespace = var.namespace
  }
  data       = { "access-control.properties" = local.access_control }
  depends_on = [helm_release.trino]
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
    additionalCatalogs = { lake = local.lake_catalog }
    coordinator = {
      tolerations                = [{ key = "metalake.io/pool", value = "trino", effect = "NoSchedule" }]
      nodeSelector               = { "metalake.io/pool" = "trino" }
      additionalConfigProperties = local.coordinator_properties
      additionalVolumes = [
        { name = "metalake", configMap = { name = "metalake-access-control" } },
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
