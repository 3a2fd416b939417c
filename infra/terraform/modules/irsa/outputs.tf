output "role_arns" {
  description = "process (or stream-<tenant>) => role ARN, for the chart's serviceAccounts.roleArns."
  value       = { for k, r in aws_iam_role.this : k => r.arn }
}
