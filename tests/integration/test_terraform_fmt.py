"""infra/terraform is formatted as OpenTofu formats it (`tofu fmt -check`; tofu built from the Go module proxy by
deploy/local/fetch/tofu.sh, in the background by deploy/local/prebuild.sh: this file sorts late in the integration
run so that the build is done by then). The parsing, checkov and the roles: tests/integration/deploy/."""

from __future__ import annotations

from deploy_tools import TERRAFORM, run, tofu


def test_the_terraform_is_formatted() -> None:
    done = run([str(tofu()), "fmt", "-check", "-recursive", "-diff", str(TERRAFORM)])
    assert done.returncode == 0, f"run: tofu fmt -recursive infra/terraform\n{done.stdout}{done.stderr}"
