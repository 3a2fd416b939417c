"""The Terraform for AWS (infra/terraform), offline: every file parses (python-hcl2, the parser checkov itself uses),
checkov finds nothing, every suppression says why in place, and the IAM roles give each process the S3 access its
code needs and no process more (docs/deploy.md#s3-access-per-process). `validate` and `plan` need the providers,
which cannot be downloaded here (docs/deploy.md#what-the-offline-checks-leave-out)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests._support.deploy_tools import CHART, TERRAFORM, checks_venv, load_yaml, run

PARSE = """
import json, sys, hcl2
out = {}
for path in sys.argv[1:]:
    with open(path) as f:
        out[path] = hcl2.load(f)
print(json.dumps(out, default=str))
"""
FILES = sorted(TERRAFORM.rglob("*.tf"))
# checkov's parser (bc-python-hcl2) wraps each attribute's value of a block in a one-element list.
SKIP = re.compile(r"#checkov:skip=(CKV2?_[A-Z0-9_]+)(:?)(.*)")


@pytest.fixture(scope="module")
def venv() -> Path:
    return checks_venv()


@pytest.fixture(scope="module")
def parsed(venv: Path) -> dict[str, Any]:
    done = run([str(venv / "python"), "-c", PARSE, *map(str, FILES)])
    assert done.returncode == 0, done.stderr
    return {str(Path(k).relative_to(TERRAFORM)): v for k, v in json.loads(done.stdout).items()}


def test_every_file_parses_and_both_environments_use_every_module(parsed: dict[str, Any]) -> None:
    modules = {p.name for p in (TERRAFORM / "modules").iterdir()}
    for env in ("pooled", "pooled-dedicated"):
        used = {next(iter(m.values()))["source"][0] for m in parsed[f"envs/{env}/main.tf"]["module"]}
        assert used == {f"../../modules/{m}" for m in modules}, env
    assert len(parsed) == len(FILES) > 20


def test_checkov_finds_nothing(venv: Path) -> None:
    done = run([str(venv / "checkov"), "-d", str(TERRAFORM), "--framework", "terraform", "--quiet", "-o", "json"])
    report = json.loads(done.stdout)
    summary = report["summary"]
    failed = [f"{c['check_id']} {c['resource']} {c['file_path']}" for c in report["results"]["failed_checks"]]
    assert summary["failed"] == 0 and summary["parsing_errors"] == 0, failed
    assert summary["passed"] > 200 and done.returncode == 0


def test_every_suppression_is_justified_in_place() -> None:
    skips = [(path, m) for path in FILES for m in SKIP.finditer(path.read_text())]
    assert skips
    for path, match in skips:
        check, colon, why = match.groups()
        assert colon and len(why.split()) >= 8, f"{path.relative_to(TERRAFORM)}: {check} needs a reason"


def _irsa_locals(parsed: dict[str, Any]) -> dict[str, Any]:
    locals_ = parsed["modules/irsa/main.tf"]["locals"]
    return {k: v[0] for block in locals_ for k, v in block.items() if not k.startswith("__")}


def test_roles_exist_only_for_processes_that_reach_the_lake(parsed: dict[str, Any]) -> None:
    access = _irsa_locals(parsed)["access"]
    assert set(access) == {"api", "connect", "stream", "lake-worker"}  # propagation, outbound, access: none
    assert access["connect"]["actions"] == ["s3:GetObject", "s3:PutObject"]  # audit appends, never a delete
    assert all("/*/audit/*" in o for o in access["connect"]["objects"])
    # The chart's example gives each role to the process of the same name.
    roles = load_yaml((CHART / "examples" / "pooled.yaml").read_text())[0]["serviceAccounts"]["roleArns"]
    assert set(roles) == set(access)
    processes = load_yaml((CHART / "values.yaml").read_text())[0]["processes"]
    assert set(access) - {"stream"} <= set(processes)


def test_a_dedicated_tenants_role_reaches_its_own_folder_only(parsed: dict[str, Any]) -> None:
    dedicated = _irsa_locals(parsed)["dedicated"]
    text = json.dumps(dedicated)
    assert "${local.root}/${t}/*" in text and "${local.all}" not in text
    policy = parsed["modules/irsa/main.tf"]["data"]
    assert "StringLike" in json.dumps(policy)  # not IfExists for them: no listing of other tenants' folders


def test_the_lake_bucket_is_private_encrypted_and_expires_vacuumed_files(parsed: dict[str, Any]) -> None:
    resources = {k: v for block in parsed["modules/s3-lake/main.tf"]["resource"] for k, v in block.items()}
    block = resources["aws_s3_bucket_public_access_block"]["lake"]
    assert all(
        block[k] == [True]
        for k in ("block_public_acls", "block_public_policy", "ignore_public_acls", "restrict_public_buckets")
    )
    sse = json.dumps(resources["aws_s3_bucket_server_side_encryption_configuration"])
    assert '"aws:kms"' in sse
    rule = resources["aws_s3_bucket_lifecycle_configuration"]["lake"]["rule"][0]
    assert rule["noncurrent_version_expiration"][0]["noncurrent_days"] == ["${var.noncurrent_days}"]
    assert resources["aws_s3_bucket_versioning"]["lake"]["versioning_configuration"][0]["status"] == ["Enabled"]
