"""The delivery ledger as one delivery sees it (:class:`LedgerScope`), in memory, for destination unit tests: the
steps and anchors behave as the MongoDB ledger's (a ``done`` step is never repeated; ``in_flight`` hands the earlier
attempt to the call). The integration tests use the real ledger on FerretDB."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, cast

from processors.outbound.runtime.ledger import LedgerScope, Step, idempotency_key


class MemoryLedger:
    def __init__(self) -> None:
        self.steps: dict[str, Step] = {}
        self.anchors: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        # Anchors whose end was delivered (the MongoDB ledger lets them expire after the retention).
        self.released: set[tuple[str, str, str, str]] = set()

    def scope(self, tenant: str, subscription: str, change_id: str) -> LedgerScope:
        return cast(LedgerScope, _Scope(self, tenant, subscription, change_id))

    def interrupt(self, tenant: str, subscription: str, change_id: str, operation: str) -> None:
        """Leave ``operation`` in flight, as an attempt that died between its call and recording it does."""
        key = idempotency_key(tenant, subscription, change_id, operation)
        self.steps[key] = Step(key, "in_flight", 1, datetime.now(UTC), {})


class _Scope:
    def __init__(self, ledger: MemoryLedger, tenant: str, subscription: str, change_id: str) -> None:
        self._ledger, self.tenant, self.subscription, self.change_id = ledger, tenant, subscription, change_id

    def key(self, operation: str) -> str:
        return idempotency_key(self.tenant, self.subscription, self.change_id, operation)

    def once(self, operation: str, call: Callable[[Step | None], Mapping[str, Any]]) -> Mapping[str, Any]:
        key = self.key(operation)
        prior = self._ledger.steps.get(key)
        if prior is not None and prior.state == "done":
            return prior.result
        self._ledger.steps[key] = Step(key, "in_flight", (prior.attempts if prior else 0) + 1, datetime.now(UTC), {})
        result = call(prior)
        self._ledger.steps[key] = Step(key, "done", self._ledger.steps[key].attempts, None, dict(result))
        return result

    def anchor(self, kind: str, asset: str, tag: str) -> Mapping[str, Any] | None:
        return self._ledger.anchors.get((self.subscription, kind, asset, tag))

    def set_anchor(self, kind: str, asset: str, tag: str, fields: Mapping[str, Any], *, released: bool = False) -> None:
        key = (self.subscription, kind, asset, tag)
        self._ledger.anchors.setdefault(key, {}).update(fields)
        if released:
            self._ledger.released.add(key)
        else:
            self._ledger.released.discard(key)

    def release_anchor(self, kind: str, asset: str, tag: str) -> None:
        if (self.subscription, kind, asset, tag) in self._ledger.anchors:
            self._ledger.released.add((self.subscription, kind, asset, tag))

    def keep_anchor(self, kind: str, asset: str, tag: str) -> None:
        self._ledger.released.discard((self.subscription, kind, asset, tag))

    def share(self, kind: str, asset: str, tag: str, value: Mapping[str, Any]) -> None:
        self._ledger.anchors.setdefault(("*", kind, asset, tag), {})[self.subscription] = dict(value)

    def unshare(self, kind: str, asset: str, tag: str) -> None:
        self._ledger.anchors.get(("*", kind, asset, tag), {}).pop(self.subscription, None)

    def shared(self, kind: str, asset: str, tag: str) -> list[Mapping[str, Any]]:
        fields = self._ledger.anchors.get(("*", kind, asset, tag), {})
        return [fields[name] for name in sorted(fields)]
