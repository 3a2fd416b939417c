"""One distribution, ``metalake``, provides the seven import packages, and the venv imports them from this checkout.

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
import tomllib
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

PACKAGES = ("metalake", "tenants", "control", "connectors", "processors", "api", "ops")
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
