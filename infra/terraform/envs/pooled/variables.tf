variable "name" {
  type    = string
  default = "metalake-pooled"
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "lake_bucket" {
  type        = string
  description = "A globally unique bucket name, e.g. <company>-metalake-lake."
}

variable "dedicated_tenants" {
  type    = list(string)
  default = []
}

# Sizes: what docs/cost.md's model gives for 50 tenants, 20 M events a day, 5 M assets
# (`metalake cost --tenants 50 --events-per-day 20000000 --assets 5000000`, prices of 2026-11-29: 2,009 USD/month).
# The trino group holds the coordinator (m6i.xlarge in the model) and one worker (m6i.2xlarge).
variable "node_groups" {
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

variable "msk_broker_instance_type" {
  type    = string
  default = "kafka.m5.large"
}

variable "documentdb_instance_class" {
  type    = string
  default = "db.r6g.large"
}

variable "trino_workers" {
  type    = number
  default = 1
}

variable "api_issuer" {
  type        = string
  description = "The public URL of metalake's API (the chart's api.issuer)."
}

variable "msk_enforce_acls" {
  type        = bool
  default     = true
  description = "false for the first apply: `metalake kafka acls --apply` as metalake-admin, then true (docs/deploy.md#aws)."
}
