variable "name" {
  type    = string
  default = "metalake-prod"
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
  default = ["globex"]
}

# Sizes: docs/cost.md's pooled example (`metalake cost --tenants 50 --events-per-day 20000000 --assets 5000000`).
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
    processes = { instance_type = "m7i.large", min = 2, desired = 3, max = 6, disk_gb = 50, spot = false, taint = false }
    spark     = { instance_type = "r7i.xlarge", min = 1, desired = 2, max = 6, disk_gb = 100, spot = false, taint = true }
    trino     = { instance_type = "r7i.2xlarge", min = 1, desired = 2, max = 4, disk_gb = 100, spot = false, taint = true }
    # The dedicated tenant's driver and executors (`metalake cost ... --dedicated 1`).
    spark-globex = { instance_type = "r7i.large", min = 1, desired = 1, max = 3, disk_gb = 100, spot = false, taint = true }
  }
}

variable "msk_broker_instance_type" {
  type    = string
  default = "kafka.m7g.large"
}

variable "documentdb_instance_class" {
  type    = string
  default = "db.r6g.large"
}

variable "trino_workers" {
  type    = number
  default = 2
}
