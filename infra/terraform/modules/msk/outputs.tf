output "bootstrap_brokers_sasl_scram" {
  value = aws_msk_cluster.this.bootstrap_brokers_sasl_scram
}

output "scram_secret_arns" {
  value = { for k, s in aws_secretsmanager_secret.scram : k => s.arn }
}
