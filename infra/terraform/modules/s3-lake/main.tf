# The lake's bucket: SSE-KMS under the platform's key (with an S3 bucket key: one KMS call per object prefix and
# time window, not per request), no public access of any kind, TLS only, versioned so that a VACUUM or an erase is
# undone within `noncurrent_days` (the lake's restore window, docs/deploy.md#backups), after which the files VACUUM
# removed (noncurrent versions) are expired, and unfinished multipart uploads of crashed writers are aborted.

terraform {
  required_version = ">= 1.6"
  required_providers {
    aws = { source = "hashicorp/aws", version = ">= 5.60" }
  }
}

resource "aws_s3_bucket" "lake" {
  #checkov:skip=CKV_AWS_144:Cross-region replication doubles the storage bill; the restore window is versioning in-region (docs/deploy.md#backups). Add a replication rule where the data must survive a region.
  #checkov:skip=CKV2_AWS_62:No process reacts to S3 events: the streaming job is fed by Kafka, not by object notifications.
  bucket        = var.bucket
  force_destroy = false
  tags          = var.tags
}

resource "aws_s3_bucket_public_access_block" "lake" {
  bucket                  = aws_s3_bucket.lake.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "lake" {
  bucket = aws_s3_bucket.lake.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "lake" {
  bucket = aws_s3_bucket.lake.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_versioning" "lake" {
  bucket = aws_s3_bucket.lake.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "lake" {
  bucket = aws_s3_bucket.lake.id

  rule {
    id     = "expire-vacuumed-files"
    status = "Enabled"
    filter {}
    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_days
    }
    expiration {
      expired_object_delete_marker = true
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 2
    }
  }
}

resource "aws_s3_bucket_logging" "lake" {
  count         = var.access_log_bucket == null ? 0 : 1
  bucket        = aws_s3_bucket.lake.id
  target_bucket = var.access_log_bucket
  target_prefix = "s3/${var.bucket}/"
}

data "aws_iam_policy_document" "tls_only" {
  statement {
    sid       = "DenyPlainHttp"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.lake.arn, "${aws_s3_bucket.lake.arn}/*"]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "lake" {
  bucket     = aws_s3_bucket.lake.id
  policy     = data.aws_iam_policy_document.tls_only.json
  depends_on = [aws_s3_bucket_public_access_block.lake]
}
