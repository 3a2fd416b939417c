variable "name" {
  type = string
}

variable "vpc_id" {
  type = string
}

variable "subnet_ids" {
  type = list(string)
}

variable "kubernetes_version" {
  type    = string
  default = "1.33"
}

variable "kms_key_arn" {
  type = string
}

variable "public_access_cidrs" {
  type        = list(string)
  default     = []
  description = "CIDRs that may reach the API endpoint from outside the VPC; empty: private only."
}

variable "node_groups" {
  description = "Managed node groups. The defaults are what docs/cost.md's model gives for 50 tenants, 20 M events a day and 5 M assets (`metalake cost --tenants 50 --events-per-day 20000000 --assets 5000000`); run the command with your figures and copy its node counts here."
  type = map(object({
    instance_type = string
    min           = number
    desired       = number
    max           = number
    disk_gb       = number
    spot          = bool
    taint         = bool
  }))
  default = {
    processes = { instance_type = "m6i.xlarge", min = 2, desired = 2, max = 6, disk_gb = 50, spot = false, taint = false }
    spark     = { instance_type = "m6i.xlarge", min = 1, desired = 1, max = 6, disk_gb = 100, spot = false, taint = true }
    trino     = { instance_type = "m6i.2xlarge", min = 2, desired = 2, max = 4, disk_gb = 100, spot = false, taint = true }
  }
}

variable "tags" {
  type    = map(string)
  default = {}
}
