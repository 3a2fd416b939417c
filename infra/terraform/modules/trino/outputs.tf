output "role_arn" {
  value = aws_iam_role.trino.arn
}
