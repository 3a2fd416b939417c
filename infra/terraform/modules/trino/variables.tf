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

variable "metalake_release" {
  type        = string
  default     = "metalake"
  description = "The metalake release whose ConfigMap <release>-trino-config holds the catalog, JWT and access-control lines (it must be in Trino's namespace, or copied there)."
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
