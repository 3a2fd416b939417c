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
        self._ledger.anchors.setdefault((self.subscription, kind, asset, tag), {}).update(fields)
