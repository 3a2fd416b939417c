#!/usr/bin/env bash
# Builds HashiCorp's `hclfmt` (the HCL formatter, hclwrite.Format: the one `tofu fmt` and `terraform fmt` apply) from
# the Go module proxy, for the Terraform's offline formatting check (tests/integration/test_terraform_fmt.py). About
# 25 CPU-seconds from empty Go caches, where OpenTofu itself took 7 CPU-minutes for the same check (docs/deploy.md
# says what tofu fmt rewrites besides). Started in the background by deploy/local/prebuild.sh after helm; the check
# runs it too, and waits on its lock.
source "$(dirname "$0")/common.sh"
go_install hclfmt v2.25.0 github.com/hashicorp/hcl/v2/cmd/hclfmt
