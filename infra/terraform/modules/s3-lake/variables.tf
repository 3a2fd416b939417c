variable "bucket" {
  type = string
}

variable "kms_key_arn" {
  type = string
}

variable "noncurrent_days" {
  type        = number
  default     = 7
  description = "How long a file that VACUUM (or an erase's purge) deleted stays restorable. An erasure is complete only once this has passed: keep it short (docs/lake.md#erase-gdpr)."
}

variable "access_log_bucket" {
  type        = string
  default     = null
  description = "A bucket for S3 server access logs (the account's log archive); null: none."
}

variable "tags" {
  type    = map(string)
  default = {}
}
