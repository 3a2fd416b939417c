variable "name" {
  type        = string
  description = "Prefix of every resource's name."
}

variable "region" {
  type = string
}

variable "zones" {
  type        = list(string)
  description = "Three availability zones, named: a subnet of each kind in each (pinned, so that a zone AWS adds never moves a subnet)."
  validation {
    condition     = length(var.zones) == 3
    error_message = "Give exactly three zones."
  }
}

variable "cidr" {
  type        = string
  default     = "10.40.0.0/16"
  description = "The VPC's block: three /20 private subnets and three /24 public ones are cut from it."
}

variable "single_nat_gateway" {
  type        = bool
  default     = false
  description = "One NAT gateway instead of one per zone (cheaper, one zone's failure cuts the others' egress)."
}

variable "kms_key_arn" {
  type        = string
  description = "The key that encrypts the flow logs."
}

variable "tags" {
  type    = map(string)
  default = {}
}
