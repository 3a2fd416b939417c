"""The admin API's tag removal treats a consent tag like a PII tag (issue 21, item 3): without the PII grant the
removal is refused (403) and audited; with it, it passes and is audited as a PII change."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from api.problems import Problem
from api.routes import assets
from api.security import TenantContext
from control.auth.principal import Principal

REMOVED = "io.metalake.classification.removed.v1"


def _ctx() -> Any:
    # The tenant's engines filter rows on "opt_in" (control.auth.protective.ProtectiveTags).
    return SimpleNamespace(protective_tags=SimpleNamespace(patterns=lambda tenant: ("PII", "consent", "opt_in")))


def test_removing_a_consent_tag_needs_the_pii_grant(monkeypatch: pytest.MonkeyPatch) -> None:
    rows: list[tuple[Any, ...]] = []
    monkeypatch.setattr(assets.audit, "record", lambda *args, **kw: rows.append((*args[3:6], kw.get("counts"))))
    writer = TenantContext("acme", Principal("mlc_w", "acme", frozenset({"events:write"})))
    for tag in ("opt_in", "consent"):
        with pytest.raises(Problem) as refused:
            assets._guard_pii(writer, _ctx(), REMOVED, {"urn": "u", "tag": tag}, "asset.tag.remove")
        assert (refused.value.status, refused.value.slug) == (403, "pii-grant-required")
    assert rows == [
        ("asset.tag.remove", "u|opt_in", "refused", {"pii": 1}),
        ("asset.tag.remove", "u|consent", "refused", {"pii": 1}),
    ]
    granted = TenantContext("acme", Principal("mlc_p", "acme", frozenset({"events:write", "pii:read"})))
    assert assets._guard_pii(granted, _ctx(), REMOVED, {"urn": "u", "tag": "opt_in"}, "asset.tag.remove") is True
    assert assets._guard_pii(writer, _ctx(), REMOVED, {"urn": "u", "tag": "finance"}, "asset.tag.remove") is False
