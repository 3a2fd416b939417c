"""One distribution, ``metalake``, provides the seven import packages, and the venv imports them from this checkout;
its licence file and Python versions agree with pyproject.

``importlib.metadata.packages_distributions()`` cannot answer this for our install: hatchling's editable install is a
``.pth`` file that adds the checkout to ``sys.path`` and records no ``top_level.txt`` and no package files in RECORD, so
the mapping has no entry for any of our packages. Instead we check what really holds: the ``metalake`` distribution is
an editable install of this checkout (``direct_url.json``), every package is imported from the checkout, and the wheel
target ships exactly these seven packages. If a later install does record them, the first test also checks the mapping.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from packaging.specifiers import SpecifierSet

PACKAGES = ("metalake", "catalog", "tenants", "control", "connectors", "processors", "api", "ops")
ROOT = Path(__file__).resolve().parents[2]


def test_the_distribution_is_an_editable_install_of_this_checkout() -> None:
    dist = importlib.metadata.distribution("metalake")
    direct_url = json.loads(dist.read_text("direct_url.json") or "{}")
    assert direct_url["dir_info"].get("editable") is True
    assert Path(unquote(urlparse(direct_url["url"]).path)).resolve() == ROOT
    mapping = importlib.metadata.packages_distributions()
    for package in PACKAGES:
        assert mapping.get(package, ["metalake"]) == ["metalake"]


@pytest.mark.parametrize("package", PACKAGES)
def test_package_is_imported_from_this_checkout(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__file__ is not None
    assert Path(module.__file__).resolve() == ROOT / package / "__init__.py"


def test_the_wheel_ships_exactly_the_seven_packages() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["name"] == "metalake"
    assert sorted(project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]) == sorted(PACKAGES)


def _project() -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project


def test_the_license_file_is_the_apache_license_pyproject_names() -> None:
    project = _project()
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text("utf-8")
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text


def test_classifiers_and_the_local_scripts_name_the_pythons_requires_python_allows() -> None:
    project = _project()
    allowed = SpecifierSet(project["requires-python"])
    minors = [minor for minor in range(8, 30) if f"3.{minor}" in allowed]
    assert minors == list(range(minors[0], minors[-1] + 1)) and minors[0] == 11
    listed = [c.rsplit(" ", 1)[1] for c in project["classifiers"] if re.fullmatch(r".* :: Python :: 3\.\d+", c)]
    assert listed == [f"3.{minor}" for minor in minors]
    script = (ROOT / "deploy" / "local" / "python.sh").read_text()
    bounds = dict(re.findall(r"^METALAKE_PYTHON_(MIN|MAX)=(\d+)", script, re.MULTILINE))
    assert (int(bounds["MIN"]), int(bounds["MAX"])) == (minors[0], minors[-1])
