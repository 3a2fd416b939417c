"""What the subscription routes do: validate a destination's configuration and secrets with its spec (no vendor
SDK), store subscriptions with their secrets merged, and request a test send the outbound runtime delivers.

Subscriptions are in the control plane (``control.subscriptions.store``); a test send is a request published to
``metalake.outbound.tests`` whose outcome the runtime records (``control.subscriptions.testsend``). A rule broken or
an object missing raises :class:`~api.problems.Problem` naming the field, as the routes answer it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pydantic import SecretStr, ValidationError

from api.problems import Problem
from api.services.events import TenantPublisher
from control.subscriptions.destinations import DestinationSpec
from control.subscriptions.filters import Filters
from control.subscriptions.store import Subscription, SubscriptionStore
from control.subscriptions.testsend import SubscriptionTest, TestOutcome, TestOutcomes
from metalake.events.validation import InvalidData
from tenants.naming import OUTBOUND_TESTS_TOPIC

Specs = Mapping[str, type[DestinationSpec]]


def _invalid(prefix: str, exc: ValidationError) -> Problem:
    first = exc.errors()[0]
    field = "/".join([prefix, *(str(p) for p in first["loc"])])
    # pydantic's msg names the rule, never the value (which may be a secret).
    return Problem(422, f"invalid-{prefix}", f"{field}: {first['msg']}", field=field)


def spec(specs: Specs, destination: str) -> type[DestinationSpec]:
    """The installed destination's spec; 422 naming the installed ones otherwise."""
    if destination not in specs:
        raise Problem(
            422, "unknown-destination", f"destination: one of {', '.join(sorted(specs))}", field="destination"
        )
    return specs[destination]


def _config(spec: type[DestinationSpec], config: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return spec.config(config).model_dump(mode="json")
    except ValidationError as exc:
        raise _invalid("config", exc) from None


def _plain(values: Mapping[str, SecretStr | None]) -> dict[str, str]:
    return {k: v.get_secret_value() for k, v in values.items() if v is not None}


def merged_secrets(
    spec: type[DestinationSpec], stored: Mapping[str, str], update: Mapping[str, SecretStr | None]
) -> dict[str, str]:
    """``update`` merged into ``stored`` as the destination merges them (a new webhook ``key_id`` starts a rotation);
    a ``null`` value is no value."""
    try:
        return spec.secrets(stored, _plain(update))
    except ValidationError as exc:
        raise _invalid("secrets", exc) from None


def _moved_endpoint(
    dest: type[DestinationSpec], before: Mapping[str, Any], after: Mapping[str, Any] | None
) -> str | None:
    """The first endpoint field ``after`` changes (both are validated dumps), or ``None``."""
    if after is None:
        return None
    return next((f for f in dest.endpoint_fields if before.get(f) != after.get(f)), None)


def get(store: SubscriptionStore, tenant: str, name: str) -> Subscription:
    sub = store.get(tenant, name)
    if sub is None:
        raise Problem(404, "not-found", "no such subscription", field="name")
    return sub


def create(  # noqa: PLR0913
    store: SubscriptionStore,
    specs: Specs,
    tenant: str,
    name: str,
    destination: str,
    *,
    config: Mapping[str, Any],
    secrets: Mapping[str, SecretStr | None],
    filters: Filters,
    enabled: bool,
) -> Subscription:
    """A new subscription, its configuration and secrets validated by the destination's spec; 409 if the name is
    taken."""
    dest = spec(specs, destination)
    checked_config = _config(dest, config)
    checked_secrets = merged_secrets(dest, {}, secrets)
    sub = store.create(tenant, name, destination, checked_config, filters, checked_secrets, enabled=enabled)
    if sub is None:
        raise Problem(409, "subscription-exists", "a subscription of that name exists", field="name")
    return sub


def update(  # noqa: PLR0913
    store: SubscriptionStore,
    specs: Specs,
    tenant: str,
    name: str,
    *,
    config: Mapping[str, Any] | None,
    secrets: Mapping[str, SecretStr | None] | None,
    filters: Filters | None,
    enabled: bool | None,
) -> Subscription:
    """The subscription with what is not ``None`` changed: configuration validated, secrets merged into the stored
    ones. A change of endpoint (:attr:`DestinationSpec.endpoint_fields`) drops the stored secrets: the request must
    supply them again (422 naming the first one missing), so none is sent to a host it was not given for."""
    current = get(store, tenant, name)
    dest = spec(specs, current.destination)
    checked_config = _config(dest, config) if config is not None else None
    checked_secrets = None
    moved = _moved_endpoint(dest, current.config, checked_config)
    if moved is not None:
        supplied = secrets or {}
        for field, info in dest.secrets_model.model_fields.items():
            if info.is_required() and supplied.get(field) is None:
                path = f"secrets/{field}"
                raise Problem(
                    422, "secrets-required", f"{path}: required again when config/{moved} changes", field=path
                )
        checked_secrets = merged_secrets(dest, {}, supplied)
    elif secrets is not None:
        checked_secrets = merged_secrets(dest, store.stored_secrets(tenant, name), secrets)
    updated = store.update(
        tenant, name, config=checked_config, filters=filters, enabled=enabled, secrets=checked_secrets
    )
    if updated is None:
        raise Problem(404, "not-found", "no such subscription", field="name")
    return updated


def delete(store: SubscriptionStore, tenant: str, name: str) -> None:
    if not store.delete(tenant, name):
        raise Problem(404, "not-found", "no such subscription", field="name")


def request_test(
    specs: Specs, outcomes: TestOutcomes, publisher: TenantPublisher, sub: Subscription, actor: str
) -> TestOutcome:
    """Ask the outbound runtime to deliver a synthetic "tag added" change for a test asset to ``sub``, once: the
    test recorded pending, then published. Its tag is the subscription's first (``PII`` without one); 422 if no
    change could carry it, 503 (the test recorded failed) if Kafka did not confirm."""
    spec(specs, sub.destination)
    tag = (sub.config.get("tags") or sub.filters.tags or ("PII",))[0]
    test = SubscriptionTest(tenant=sub.tenant, subscription=sub.name, tag=str(tag), actor=actor)
    try:
        event = test.event()
        test.change()
    except InvalidData:
        # No change the pipeline publishes could carry this tag: a test with it would prove nothing.
        raise Problem(422, "invalid-tag", "the subscription's first tag is not a tag name", field="tags") from None
    requested = outcomes.pending(test)
    try:
        publisher.publish(event, OUTBOUND_TESTS_TOPIC)
    except Problem:
        outcomes.finish(sub.tenant, test.id, "failed", "not confirmed by Kafka; nothing was sent")
        raise
    return requested


def wait(outcomes: TestOutcomes, tenant: str, test_id: str, wait_s: float) -> TestOutcome | None:
    """The test's outcome once the runtime recorded it, or ``None`` after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    pause = 0.05
    while True:
        outcome = outcomes.get(tenant, test_id)
        if outcome is not None and outcome.status != "pending":
            return outcome
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.5)


def find_test(outcomes: TestOutcomes, tenant: str, name: str, test_id: str) -> TestOutcome:
    """A test of subscription ``name``; 404 for another subscription's."""
    outcome = outcomes.get(tenant, test_id)
    if outcome is None or outcome.subscription != name:
        raise Problem(404, "not-found", "no such test of this subscription", field="test_id")
    return outcome
