"""Third-party secrets at rest: sealed bound to tenant, object and field; opened under the current or a previous
key-encryption key; re-sealed under the current one. Pure functions, no database."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from pydantic import SecretStr

from metalake.sealing import Binding, ResealCount, Sealer, SealingError, is_sealed, sealer_for
from ops.settings import Settings

OLD = SecretStr("the-previous-key-encryption-key")
NEW = SecretStr("the-current-key-encryption-key")
HERE = Binding("acme", "subscription_secrets/acme/alerts", "values.token")


def test_a_sealed_value_holds_no_plaintext_and_opens_where_it_was_sealed() -> None:
    sealed = Sealer(NEW).seal("xoxb-s3cret-token", HERE)
    assert is_sealed(sealed) and sealed["kek"] == Sealer(NEW).kek_id
    assert "s3cret" not in str(sealed) and b"s3cret" not in base64.b64decode(sealed["ct"])
    assert Sealer(NEW).open(sealed, HERE).get_secret_value() == "xoxb-s3cret-token"
    # A fresh nonce each time: equal secrets do not show as equal ciphertexts.
    assert Sealer(NEW).seal("xoxb-s3cret-token", HERE)["ct"] != sealed["ct"]


@pytest.mark.parametrize(
    "moved",
    [
        Binding("globex", HERE.object, HERE.field),  # another tenant
        Binding("acme", "subscription_secrets/acme/other", HERE.field),  # another object of the same tenant
        Binding("acme", "connector_secrets/acme/alerts", HERE.field),  # another collection
        Binding("acme", HERE.object, "values.api_token"),  # another field
        Binding("acme/subscription_secrets", "acme/alerts", HERE.field),  # the same characters, split otherwise
    ],
)
def test_a_sealed_value_moved_to_another_tenant_object_or_field_does_not_open(moved: Binding) -> None:
    sealed = Sealer(NEW).seal("xoxb-s3cret-token", HERE)
    with pytest.raises(SealingError) as refused:
        Sealer(NEW).open(sealed, moved)
    assert "s3cret" not in str(refused.value)


def _tampered(sealed: dict[str, Any]) -> dict[str, Any]:
    blob = bytearray(base64.b64decode(sealed["ct"]))
    blob[-1] ^= 1
    return {**sealed, "ct": base64.b64encode(bytes(blob)).decode()}


@pytest.mark.parametrize(
    "stored",
    [
        "xoxb-s3cret-token",  # plain text written before sealing (or planted in the database)
        {"kek": "0000000000000000", "ct": "AAAA"},  # a key this process does not have
        {"value": "xoxb-s3cret-token"},  # not a sealed document
        None,
    ],
)
def test_anything_but_a_sealed_value_is_refused_never_trusted(stored: object) -> None:
    with pytest.raises(SealingError) as refused:
        Sealer(NEW).open(stored, HERE)
    assert "s3cret" not in str(refused.value)


def test_a_tampered_value_is_refused() -> None:
    sealed = Sealer(NEW).seal("xoxb-s3cret-token", HERE)
    with pytest.raises(SealingError):
        Sealer(NEW).open(_tampered(dict(sealed)), HERE)
    with pytest.raises(SealingError):
        Sealer(NEW).open({**sealed, "ct": "not base64!"}, HERE)


def test_rotation_opens_values_of_a_previous_key_and_reseals_them_under_the_current_one() -> None:
    old_sealed = Sealer(OLD).seal("xoxb-s3cret-token", HERE)
    with pytest.raises(SealingError, match="not configured"):
        Sealer(NEW).open(old_sealed, HERE)
    rotating = Sealer(NEW, [OLD])
    assert rotating.open(old_sealed, HERE).get_secret_value() == "xoxb-s3cret-token"
    resealed = rotating.reseal(old_sealed, HERE)
    assert resealed is not None and resealed["kek"] == Sealer(NEW).kek_id != old_sealed["kek"]
    # Once resealed, the previous key is no longer needed; a current value needs no rewrite.
    assert Sealer(NEW).open(resealed, HERE).get_secret_value() == "xoxb-s3cret-token"
    assert rotating.reseal(resealed, HERE) is None
    # The binding holds through a reseal too: a moved value is not laundered into a valid one.
    with pytest.raises(SealingError):
        rotating.reseal(old_sealed, Binding("globex", HERE.object, HERE.field))


def test_a_reseal_pass_seals_plain_values_rewraps_old_ones_and_keeps_what_does_not_open() -> None:
    rotating = Sealer(NEW, [OLD])
    stranger = Sealer(SecretStr("a-key-nobody-configured")).seal("x", HERE)
    values: dict[str, object] = {
        "plain": "legacy-s3cret",
        "old": Sealer(OLD).seal("old-s3cret", Binding("acme", "doc", "f.old")),
        "current": Sealer(NEW).seal("current-s3cret", Binding("acme", "doc", "f.current")),
        "lost": stranger,
    }
    count = ResealCount()
    out = count.each(rotating, values, lambda field: Binding("acme", "doc", f"f.{field}"))
    assert out is not None and out["lost"] == stranger and out["current"] == values["current"]
    assert (count.plain, count.rewrapped, count.current, count.failed) == (1, 1, 1, ["doc field f.lost"])
    assert Sealer(NEW).open(out["plain"], Binding("acme", "doc", "f.plain")).get_secret_value() == "legacy-s3cret"
    assert Sealer(NEW).open(out["old"], Binding("acme", "doc", "f.old")).get_secret_value() == "old-s3cret"
    assert (
        ResealCount().each(rotating, {"current": values["current"]}, lambda f: Binding("acme", "doc", "f.current"))
        is None
    )


def test_the_key_comes_from_the_secrets_setting_else_the_apis_and_is_never_absent_silently(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("METALAKE_API__KEY_ENCRYPTION_KEY", "METALAKE_SECRETS__KEY_ENCRYPTION_KEY", "METALAKE_ENV_FILE"):
        monkeypatch.delenv(variable, raising=False)
    assert sealer_for(Settings(_env_file=None)) is None
    via_api = sealer_for(Settings.model_validate({"api": {"key_encryption_key": "api-key-encryption-key"}}))
    assert via_api is not None and via_api.kek_id == Sealer(SecretStr("api-key-encryption-key")).kek_id
    both = Settings.model_validate(
        {
            "api": {"key_encryption_key": "api-key-encryption-key"},
            "secrets": {
                "key_encryption_key": NEW.get_secret_value(),
                "previous_key_encryption_keys": [OLD.get_secret_value()],
            },
        }
    )
    chosen = sealer_for(both)
    assert chosen is not None and chosen.kek_id == Sealer(NEW).kek_id
    assert chosen.open(Sealer(OLD).seal("v", HERE), HERE).get_secret_value() == "v"
    with pytest.raises(SealingError, match="at least 16"):
        Sealer(SecretStr("short"))
