output "bucket" {
  value = aws_s3_bucket.lake.id
}

output "arn" {
  value = aws_s3_bucket.lake.arn
}
