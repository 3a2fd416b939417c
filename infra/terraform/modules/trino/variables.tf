variable "name" {
  type = string
}

variable "region" {
  type = string
}

variable "bucket" {
  type = string
}

variable "prefix" {
  type    = string
  default = "lake"
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
  default = "trino"
}

variable "api_issuer" {
  type        = string
  description = "metalake's API issuer (the chart's api.issuer): Trino checks tenants' tokens against its JWKS."
}

variable "rules_claim" {
  type    = string
  default = "metalake-trino-rules"
}

variable "chart_version" {
  type    = string
  default = "1.39.1"
}

variable "trino_version" {
  type        = string
  default     = "476"
  description = "The version metalake is tested with (docs/production.md#trino)."
}

variable "workers" {
  type        = number
  default     = 1
  description = "Sized by docs/cost.md: Trino cores per query rate."
}

variable "tags" {
  type    = map(string)
  default = {}
}
