variable "name" {
  type = string
}

variable "vpc_id" {
  type = string
}

variable "subnet_ids" {
  type = list(string)
}

variable "client_security_group_id" {
  type = string
}

variable "kms_key_arn" {
  type = string
}

variable "instance_class" {
  type        = string
  default     = "db.r6g.large"
  description = "Sized by docs/cost.md: the projections' bytes per asset times the assets, in memory."
}

variable "instances" {
  type        = number
  default     = 2
  description = "A primary and a replica in another zone."
}

variable "backup_retention_days" {
  type    = number
  default = 14
}

variable "tags" {
  type    = map(string)
  default = {}
}
