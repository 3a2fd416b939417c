"""The columns Trino last listed for a table in a column-masks request, so the consent row filter references only
columns the table has (docs/enforcement.md, "Row filter").

Trino asks for a table's column masks (every column of the relation, with its type) and then, in the same analysis,
for its row filters, which name the table only. A consent tag on a column the table does not have (a dropped column,
a tag on a URN no column matches) would make the filter reference a missing column, and Trino would fail every
query on the table. Kept per engine and table for ``ttl_s`` seconds, at most ``max_entries`` (least recently used out
first); per process: a row-filters request another API process serves finds nothing here, and the filter then names
every consent-tagged column, as without this.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

from api.services.enforcement import ColumnRef

TableKey = tuple[str, str, str, str]  # engine id, catalog, schema, table (lower case)


def table_key(engine_id: str, catalog: str, schema: str, table: str) -> TableKey:
    return (engine_id, catalog.lower(), schema.lower(), table.lower())


class SeenColumns:
    def __init__(self, ttl_s: float, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl_s, self._max, self._clock = ttl_s, max_entries, clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[TableKey, tuple[float, frozenset[str]]] = OrderedDict()

    def put(self, key: TableKey, columns: Iterable[str]) -> None:
        value = (self._clock() + self._ttl_s, frozenset(c.lower() for c in columns))
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def remember(self, engine_id: str, columns: Sequence[ColumnRef]) -> None:
        """The columns of a column-masks request, if they are one table's (Trino sends every column of it)."""
        if len({(c.catalog, c.schema, c.table) for c in columns}) == 1:
            first = columns[0]
            self.put(table_key(engine_id, first.catalog, first.schema, first.table), [c.column for c in columns])

    def get(self, key: TableKey) -> frozenset[str] | None:
        with self._lock:
            hit = self._entries.get(key)
            return hit[1] if hit is not None and hit[0] > self._clock() else None
