"""The receiver's verification example in docs/outbound.md runs as written and agrees with the runtime's signer."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from processors.outbound.destinations.webhook.signing import SigningKey, sign

DOC = Path(__file__).resolve().parents[6] / "docs" / "outbound.md"


def _example() -> dict[str, Any]:
    block = re.search(r"```python\n(.*?)```", DOC.read_text("utf-8"), re.DOTALL)
    assert block is not None
    namespace: dict[str, Any] = {}
    exec(compile(block.group(1), str(DOC), "exec"), namespace)  # noqa: S102 - our own documentation
    return namespace


def test_the_example_verifies_what_the_runtime_signs() -> None:
    verify_webhook = _example()["verify_webhook"]
    body = b'{"id":"mld_1","type":"classification.added"}'
    headers = sign(
        [SigningKey("k2", "a-new-secret-0123456789"), SigningKey("k1", "whsec_c2VjcmV0")], "mld_1", 100, body
    )
    verify_webhook("whsec_c2VjcmV0", headers, body, now=100)
    verify_webhook("a-new-secret-0123456789", headers, body, now=100)
    with pytest.raises(ValueError, match="signature"):
        verify_webhook("whsec_c2VjcmV0", headers, body + b" ", now=100)
    with pytest.raises(ValueError, match="timestamp"):
        verify_webhook("whsec_c2VjcmV0", headers, body, now=1000)
