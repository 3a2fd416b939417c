"""``metalake secrets reseal`` on the real control plane (FerretDB): secrets stored in clear by an older version and
secrets sealed under a previous key-encryption key end sealed under the current one, and the stores open them.
Scoped to a fresh tenant (``--tenant``): the shared stack's other tenants are left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import SecretStr
from pymongo import MongoClient

from control.connectors.store import ControlStore
from control.subscriptions.store import SubscriptionStore, secret_binding
from metalake.sealing import Sealer, SealingError, is_sealed, require, sealer_for
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import CONTROL_DATABASE

pytestmark = pytest.mark.integration

PREVIOUS = "a-previous-key-encryption-key-for-the-test"


@pytest.fixture
def control(settings: Settings, stack: StackManager) -> Iterator[Any]:
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri)
    yield client[CONTROL_DATABASE]
    client.close()


def _reseal(tenant: str) -> dict[str, Any]:
    env = {**os.environ, "METALAKE_SECRETS__PREVIOUS_KEY_ENCRYPTION_KEYS": json.dumps([PREVIOUS])}
    done = subprocess.run(
        [sys.executable, "-m", "ops", "secrets", "reseal", "--tenant", tenant],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_reseal_seals_plain_secrets_and_rewraps_a_previous_keys(settings: Settings, control: Any, tenant: str) -> None:
    current = require(sealer_for(settings))
    now = datetime.now(UTC)
    # As an older version left them: in clear.
    control["connector_secrets"].insert_one(
        {"_id": f"{tenant}/pg", "tenant": tenant, "name": "pg", "config": {"password": "legacy-pg-password"}}
    )
    control["connector_secrets"].insert_one(
        {
            "_id": f"{tenant}/mc",
            "tenant": tenant,
            "name": "mc",
            "webhook_secrets": [{"id": "0a1b2c3d", "value": "legacy-mc-secret", "created_at": now}],
            "rev": 1,
        }
    )
    control["subscription_secrets"].insert_one(
        {"_id": f"{tenant}/alerts", "tenant": tenant, "name": "alerts", "values": {"token": "legacy-slack-token"}}
    )
    # Sealed under a key that is no longer the current one.
    old = Sealer(SecretStr(PREVIOUS)).seal("rotated-jira-token", secret_binding(tenant, "jira", "api_token"))
    control["subscription_secrets"].insert_one(
        {"_id": f"{tenant}/jira", "tenant": tenant, "name": "jira", "values": {"api_token": old}}
    )
    connectors, subscriptions = ControlStore(control, current), SubscriptionStore(control, current)
    # Plain values and unknown keys are refused, never used.
    with pytest.raises(SealingError):
        connectors.secrets.config(tenant, "pg")
    with pytest.raises(SealingError):
        subscriptions.stored_secrets(tenant, "jira")

    report = _reseal(tenant)
    assert report["kek_id"] == current.kek_id
    assert (report["sealed_from_plain"], report["resealed_from_previous_key"]) == (3, 1)
    assert (report["not_opened"], report["changed_meanwhile"]) == ([], [])

    for collection in ("connector_secrets", "subscription_secrets"):
        for doc in control[collection].find({"tenant": tenant}):
            assert "legacy-" not in str(doc) and "rotated-jira" not in str(doc)
    assert connectors.secrets.config(tenant, "pg")["password"].get_secret_value() == "legacy-pg-password"
    assert [s.get_secret_value() for s in connectors.secrets.webhook(tenant, "mc")] == ["legacy-mc-secret"]
    assert subscriptions.stored_secrets(tenant, "alerts") == {"token": "legacy-slack-token"}
    assert subscriptions.stored_secrets(tenant, "jira") == {"api_token": "rotated-jira-token"}
    (jira,) = control["subscription_secrets"].find({"_id": f"{tenant}/jira"})
    assert is_sealed(jira["values"]["api_token"]) and jira["values"]["api_token"]["kek"] == current.kek_id

    # Again: nothing left to do.
    again = _reseal(tenant)
    assert (again["sealed_from_plain"], again["resealed_from_previous_key"], again["already_current"]) == (0, 0, 4)
