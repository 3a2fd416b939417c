# The platform's customer-managed key: the lake's objects, MSK's storage and SCRAM secrets, DocumentDB, EKS secrets
# and the log groups. Rotated yearly; the account administers it, CloudWatch Logs may use it for its log groups.

terraform {
  required_version = ">= 1.6"
  required_providers {
    aws = { source = "hashicorp/aws", version = ">= 5.60" }
  }
}

data "aws_caller_identity" "this" {}

data "aws_iam_policy_document" "key" {
  #checkov:skip=CKV_AWS_111:A key policy's "*" resource is the key itself, and the account root is AWS's default administrator of a key (IAM policies then decide who uses it)
  #checkov:skip=CKV_AWS_356:A key policy's "*" resource is the key itself, never another resource
  #checkov:skip=CKV_AWS_109:The account root administers the key, AWS's default key policy; without it the key becomes unmanageable
  statement {
    sid       = "AccountAdministers"
    actions   = ["kms:*"]
    resources = ["*"] # in a key policy "*" is this key
    principals {
      type        = "AWS"
      identifiers = ["arn:aws:iam::${data.aws_caller_identity.this.account_id}:root"]
    }
  }
  statement {
    sid       = "LogsEncrypt"
    actions   = ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["logs.${var.region}.amazonaws.com"]
    }
    condition {
      test     = "ArnLike"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values   = ["arn:aws:logs:${var.region}:${data.aws_caller_identity.this.account_id}:log-group:/metalake/*"]
    }
  }
}

resource "aws_kms_key" "this" {
  description             = "metalake ${var.name}"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.key.json
  tags                    = var.tags
}

resource "aws_kms_alias" "this" {
  name          = "alias/metalake-${var.name}"
  target_key_id = aws_kms_key.this.key_id
}

variable "name" {
  type = string
}

variable "region" {
  type = string
}

variable "tags" {
  type    = map(string)
  default = {}
}

output "key_arn" {
  value = aws_kms_key.this.arn
}
