"""The two legacy forms `tofu fmt` rewrites and hclfmt leaves alone (tests/_support/terraform_style.py)."""

from pathlib import Path

import pytest

from tests._support.terraform_style import legacy_forms

TERRAFORM = Path(__file__).resolve().parents[2] / "infra" / "terraform"


@pytest.mark.parametrize(
    "text",
    [
        'locals {\n  a = "${var.x}"\n}',
        '  name = "${lookup(var.tags, "name")}"',
        '  list = ["${var.a}", "b"]',
        'variable "x" {\n  type = "string"\n}',
        '  type = "map"  # old',
    ],
)
def test_each_form_tofu_fmt_rewrites_is_found(text: str) -> None:
    assert legacy_forms(text)


@pytest.mark.parametrize(
    "text",
    [
        "  a = var.x",
        '  name = "prefix-${var.x}"',
        '  name = "${var.x}-suffix"',
        '  name = "${var.a}${var.b}"',
        "  type = string",
        "  type = list(string)",
        '  description = "type = \\"string\\""',
    ],
)
def test_what_tofu_fmt_keeps_is_not(text: str) -> None:
    assert legacy_forms(text) == []


def test_findings_name_their_line() -> None:
    assert legacy_forms('locals {\n  a = 1\n  b = "${var.x}"\n}') == [
        'line 3: an interpolation-only string "${...}" (tofu fmt unwraps it)'
    ]


def test_the_repository_terraform_has_none() -> None:
    files = sorted(TERRAFORM.rglob("*.tf"))
    assert files
    assert {str(f): legacy_forms(f.read_text()) for f in files if legacy_forms(f.read_text())} == {}
