"""infra/terraform is formatted as OpenTofu formats it: laid out by hclfmt (hclwrite.Format, the formatter `tofu fmt`
applies; built from the Go module proxy by deploy/local/fetch/hclfmt.sh, in the background by
deploy/local/prebuild.sh), and free of the two legacy forms tofu fmt rewrites besides (tests/_support/
terraform_style.py). The parsing, checkov and the roles: tests/integration/deploy/."""

from __future__ import annotations

from pathlib import Path

from tests._support.deploy_tools import TERRAFORM, hclfmt, run
from tests._support.terraform_style import legacy_forms


def _files() -> list[Path]:
    return sorted(p for p in TERRAFORM.rglob("*") if p.suffix in (".tf", ".tfvars"))


def test_the_terraform_is_formatted() -> None:
    files = _files()
    assert len(files) > 10, files
    done = run([str(hclfmt()), "-check", "-require-no-change", *map(str, files)])
    assert done.returncode == 0, (
        f"run: {hclfmt()} -w <the file> (or tofu fmt -recursive infra/terraform)\n{done.stderr}"
    )
    assert {str(f): legacy_forms(f.read_text()) for f in files if legacy_forms(f.read_text())} == {}


def test_the_formatter_refuses_a_misaligned_file(tmp_path: Path) -> None:
    misaligned = tmp_path / "main.tf"
    misaligned.write_text("locals {\n  a = 1\n  bb = 2\n}\n")

    done = run([str(hclfmt()), "-check", "-require-no-change", str(misaligned)])

    assert done.returncode != 0
    assert "main.tf" in done.stderr
