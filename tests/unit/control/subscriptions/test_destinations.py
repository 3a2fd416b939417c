"""Destination specs: what the API validates subscriptions with, loaded without any vendor SDK."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from processors.outbound.destinations.jira.spec import JiraSpec
from processors.outbound.destinations.slack.spec import SlackSpec
from processors.outbound.destinations.webhook.spec import WebhookSpec

SPEC_MODULES = [f"processors.outbound.destinations.{name}.spec" for name in ("slack", "jira", "webhook")]
SDKS = ["slack_sdk", "jira", "requests", "urllib3", "processors.outbound.runtime.destination"]


def test_specs_load_without_a_vendor_sdk_or_the_runtime() -> None:
    # A fresh interpreter: this test process has imported the SDKs through other tests already.
    code = "\n".join(
        [
            "import sys",
            *(f"import {module}" for module in SPEC_MODULES),
            f"print(sorted(m for m in {SDKS!r} if m in sys.modules))",
        ]
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_config_is_validated_and_normalised() -> None:
    assert SlackSpec.config({"channel": "C0123"}).model_dump(mode="json") == {
        "channel": "C0123",
        "base_url": None,
        "incidents": True,
        "catalog_url": None,
    }
    with pytest.raises(ValidationError):
        SlackSpec.config({"channel": "C0123", "token": "xoxb-1"})  # secrets are not configuration
    jira = JiraSpec.config({"server": "https://x.atlassian.net", "email": "a@b.c", "project": "SEC"})
    assert jira.model_dump(mode="json")["tags"] == ["PII", "GDPR"]


def test_secrets_are_merged_validated_and_returned_plain() -> None:
    assert SlackSpec.secrets({"token": "old"}, {"token": "xoxb-new"}) == {"token": "xoxb-new"}
    with pytest.raises(ValidationError) as raised:
        WebhookSpec.secrets({}, {"key_id": "k1", "secret": "too-short"})
    assert "too-short" not in str(raised.value.errors(include_input=False))
    rotated = WebhookSpec.secrets({"key_id": "k1", "secret": "s" * 16}, {"key_id": "k2", "secret": "t" * 16})
    assert rotated == {"key_id": "k2", "secret": "t" * 16, "previous_key_id": "k1", "previous_secret": "s" * 16}
