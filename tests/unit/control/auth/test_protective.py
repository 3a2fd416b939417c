"""Which tags protect data besides PII tags (control/auth/protective.py): the setting's, and each registered
engine's consent tag (issue 21, item 3), cached per tenant."""

from __future__ import annotations

from typing import Any

from control.auth.pii import weakening
from control.auth.protective import ProtectiveTags, literal, protective_patterns
from tests._support.mongo_list import FakeDatabase

REMOVED = "io.metalake.classification.removed.v1"


def test_patterns_join_pii_tags_the_setting_and_the_tenants_engines_consent_tags() -> None:
    db: Any = FakeDatabase()
    db["engines"].insert_many(
        [
            {"_id": "engine/1", "tenant": "acme", "consent_tag": "opt_in"},
            {"_id": "engine/2", "tenant": "acme", "consent_tag": None},
            {"_id": "engine/3", "tenant": "other", "consent_tag": "theirs"},
        ]
    )
    now = [0.0]
    tags = ProtectiveTags(db, ["PII", "PII.*"], ["consent"], ttl_s=1.0, clock=lambda: now[0])
    patterns = tags.patterns("acme")
    assert patterns == ("PII", "PII.*", "consent", "opt_in")
    assert weakening(REMOVED, {"urn": "u", "tag": "opt_in"}, patterns) is not None
    assert weakening(REMOVED, {"urn": "u", "tag": "consent"}, patterns) is not None
    assert weakening(REMOVED, {"urn": "u", "tag": "theirs"}, patterns) is None  # another tenant's engine
    # Cached for ttl_s: a new engine's consent tag counts after at most that delay.
    db["engines"].insert_one({"_id": "engine/4", "tenant": "acme", "consent_tag": "agreed"})
    assert "agreed" not in tags.patterns("acme")
    now[0] = 1.5
    assert "agreed" in tags.patterns("acme")


def test_a_consent_tag_is_a_name_not_a_pattern() -> None:
    assert literal("ok[*]?") == "ok[[][*]][?]"
    patterns = protective_patterns([], [], ["c*"])
    assert weakening(REMOVED, {"urn": "u", "tag": "c*"}, patterns) is not None
    assert weakening(REMOVED, {"urn": "u", "tag": "cx"}, patterns) is None
