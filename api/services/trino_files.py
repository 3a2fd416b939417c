"""The access control files a registration hands out for the customer's Trino (docs/enforcement.md, section 2).

Two access controls, both of which must allow an operation (``access-control.config-files``):

- ``opa-access-control.properties``: metalake's OPA decisions (masks, consent filter, and the refusals of
  :mod:`api.services.opa_decisions`);
- ``rules-access-control.properties`` with ``metalake-rules.json``: Trino's file-based rules as a restrictive
  baseline the customer widens: every catalog read-only, no ownership changes, only built-in functions and
  procedures (file-based rules allow nothing else when they name none: pass-through table functions and
  ``system.execute`` are refused to everyone), impersonation only by the engine's ``impersonators``, others' queries
  and system information only to its ``operators``.

Names in the rules are regular expressions matched whole (Java): each name is escaped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from api.services.enforcement import Engine

OPA_FILE = "opa-access-control.properties"
RULES_PROPERTIES = "rules-access-control.properties"
RULES_JSON = "metalake-rules.json"
CONFIG_LINE = "config.properties"

# What each URI of the OPA file points at (docs/enforcement.md).
POLICY_URIS = {
    "opa.policy.uri": "allow",
    "opa.policy.batched-uri": "batch",
    "opa.policy.row-filters-uri": "row-filters",
    "opa.policy.batch-column-masking-uri": "column-masks",
}


def access_control_properties(base_url: str, key: str) -> str:
    """The OPA access control file for an engine key and the API's public base URL."""
    base = base_url.rstrip("/") + f"/v1/opa/{key}/"
    lines = ["access-control.name=opa", *(f"{prop}={base}{path}" for prop, path in POLICY_URIS.items())]
    return "\n".join(lines) + "\n"


def _names(names: Iterable[str]) -> str | None:
    escaped = sorted(re.escape(n) for n in names)
    return "|".join(escaped) if escaped else None


def rules(engine: Engine) -> dict[str, Any]:
    """The restrictive file-based rules (Trino 476 ``security.config-file``) for the engine."""
    impersonators, operators = _names(engine.impersonators), _names(engine.operators)
    queries: list[dict[str, Any]] = []
    system_information: list[dict[str, Any]] = []
    impersonation: list[dict[str, Any]] = []
    if operators is not None:
        queries.append({"user": operators, "allow": ["execute", "view", "kill"]})
        system_information.append({"user": operators, "allow": ["read", "write"]})
    # Everyone runs queries; Trino always lets a user view and kill their own.
    queries.append({"allow": ["execute"]})
    if impersonators is not None:
        # metalake's OPA decision still refuses a PII user as the target.
        impersonation.append({"original_user": impersonators, "new_user": ".*", "allow": True})
    return {
        "catalogs": [{"allow": "read-only"}],
        "queries": queries,
        "impersonation": impersonation,
        "system_information": system_information,
        "authorization": [],
    }


def trino_files(base_url: str, key: str, engine: Engine) -> dict[str, str]:
    """Every file to install under the customer Trino's ``etc/`` (``config.properties``: the line to add)."""
    return {
        CONFIG_LINE: f"access-control.config-files=etc/{RULES_PROPERTIES},etc/{OPA_FILE}\n",
        RULES_PROPERTIES: f"access-control.name=file\nsecurity.config-file=etc/{RULES_JSON}\n",
        RULES_JSON: json.dumps(rules(engine), indent=2) + "\n",
        OPA_FILE: access_control_properties(base_url, key),
    }
