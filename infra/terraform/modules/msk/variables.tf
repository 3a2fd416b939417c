variable "name" {
  type = string
}

variable "vpc_id" {
  type = string
}

variable "subnet_ids" {
  type        = list(string)
  description = "Three private subnets, one per zone: a broker in each."
}

variable "client_security_group_id" {
  type        = string
  description = "The EKS nodes' security group: the only clients."
}

variable "kafka_version" {
  type    = string
  default = "3.8.x"
}

variable "broker_instance_type" {
  type        = string
  default     = "kafka.m5.large"
  description = "Sized by docs/cost.md (`metalake cost`): three kafka.m5.large, one per zone, and three more per 30 MB/s of producer traffic at the peak."
}

variable "broker_volume_gb" {
  type        = number
  default     = 150
  description = "Per broker: docs/cost.md's 420 GB (7 days of 20 M events a day of ~1 KB, 3 replicas) over three brokers, rounded up."
}

variable "kms_key_arn" {
  type = string
}

variable "principals" {
  type        = list(string)
  default     = ["metalake-admin", "metalake-api", "metalake-connect", "metalake-stream", "metalake-propagation", "metalake-outbound", "metalake-access", "metalake-lake"]
  description = "SCRAM users: the administrator that applies the ACLs and the principal of each process kind."
}

variable "enforce_acls" {
  type        = bool
  default     = true
  description = "allow.everyone.if.no.acl.found=false. Apply the ACLs first (`metalake kafka acls --apply` as metalake-admin, granted ALTER on the cluster while this was false), then turn it on."
}

variable "tags" {
  type    = map(string)
  default = {}
}
