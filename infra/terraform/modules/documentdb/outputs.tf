output "endpoint" {
  value = aws_docdb_cluster.this.endpoint
}

output "master_secret_arn" {
  value = aws_secretsmanager_secret.master.arn
}
