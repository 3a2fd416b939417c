variable "name" {
  type        = string
  description = "Prefix of the roles' names."
}

variable "region" {
  type = string
}

variable "bucket" {
  type = string
}

variable "prefix" {
  type        = string
  default     = "lake"
  description = "The lake root's key prefix in the bucket (METALAKE_LAKE__ROOT=s3a://<bucket>/<prefix>)."
}

variable "kms_key_arn" {
  type = string
}

variable "oidc_provider_arn" {
  type = string
}

variable "oidc_issuer" {
  type = string
}

variable "namespace" {
  type    = string
  default = "metalake"
}

variable "release" {
  type        = string
  default     = "metalake"
  description = "The Helm release's name: the chart names a process's service account <release>-<process>."
}

variable "dedicated_tenants" {
  type        = list(string)
  default     = []
  description = "Dedicated tenants whose job runs as a release <release>-<tenant> (deploy/helm/metalake/examples/dedicated-tenant.yaml)."
}

variable "tags" {
  type    = map(string)
  default = {}
}
