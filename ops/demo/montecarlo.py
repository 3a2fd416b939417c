"""The demo's Monte Carlo side: the connector's configuration (its warehouse map pointing at the demo's catalog) and
an incident webhook signed exactly as Monte Carlo signs it (docs/connectors/montecarlo.md, "Signature verification").

The signing is written out here on purpose, as a sender outside metalake would write it, rather than imported from
the connector: the demo then shows that the worker accepts what Monte Carlo's documented algorithm produces.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.parse
import uuid
from dataclasses import dataclass
from typing import Any

from ops.demo.catalog import DB

CONNECTOR = "monte-carlo"
TYPE = "montecarlo"
SLUG = "monte-carlo"
#: Monte Carlo's id of the demo's warehouse (fixed, so reruns keep one map entry); its tables are the demo catalog's.
WAREHOUSE = "5f1c3a7e-0d2b-4c6a-9e8f-0000000d3e30"
ACCOUNT = "9a59c6f1-203a-4c72-8cd7-132db7f21b92"
SIGNATURE_HEADER = "x-mcd-signature"


def connector_config() -> dict[str, Any]:
    """The connector's configuration: MC's warehouse ``WAREHOUSE`` holds the demo catalog's tables (platform and
    instance of its URNs); a payload that names no warehouse goes to the same place."""
    platform, instance, _ = DB
    return {
        "default_platform": platform,
        "default_instance": instance,
        "warehouses": {WAREHOUSE: {"platform": platform, "instance": instance}},
    }


@dataclass(frozen=True)
class Incident:
    incident_id: str
    body: bytes  # exactly what is sent and signed
    full_table_id: str


def incident(schema: str, table: str, details: str, incident_id: str | None = None) -> Incident:
    """An ``open_anomaly_incident`` delivery naming ``<database>:<schema>.<table>`` of the demo's database by its MCON,
    whose warehouse the connector's map resolves."""
    incident_id = incident_id or str(uuid.uuid4())
    full_table_id = f"{DB[2]}:{schema}.{table}"
    doc = {
        "account": {"id": ACCOUNT},
        "action": "incident",
        "type": "open_anomaly_incident",
        "version": "v0.1",
        "payload": {
            "incident_id": incident_id,
            "incident_type": "ANOMALIES",
            "group_id": f"{DB[2]}:{schema}",
            "url": f"https://getmontecarlo.com/incidents/{incident_id}",
            "event_list": [
                {
                    "event_details": details,
                    "table_name": table,
                    "mcon": f"MCON++{ACCOUNT}++{WAREHOUSE}++table++{full_table_id}",
                }
            ],
        },
    }
    return Incident(incident_id, json.dumps(doc).encode(), full_table_id)


def mc_signature(secret: str, body: bytes) -> str:
    """Monte Carlo's ``x-mcd-signature``: hex HMAC-SHA512 of ``urlencode(json.loads(body))``, not of the raw body."""
    message = urllib.parse.urlencode(json.loads(body)).encode("utf8")
    return hmac.new(secret.encode(), message, hashlib.sha512).hexdigest()


def signed_headers(secret: str, body: bytes) -> dict[str, str]:
    return {SIGNATURE_HEADER: mc_signature(secret, body), "content-type": "application/json"}
