"""What one OpenLineage event may build, checked while it is built.

A nested ``schema`` facet names each column by its path (``a.b.c``), so a chain of fields repeats every name in every
descendant: text and URNs quadratic in the nesting depth. Checked after the fact, a 5 MiB body had built GiBs in the
worker every tenant shares. So the mapping checks as it goes (before a name is joined, before a URN is kept): fields
nest at most :data:`MAX_NESTING` deep, a name holds at most :data:`MAX_NAME` characters and a URN :data:`MAX_URN` (the
event schemas' bounds), and the names and URNs one event builds together stay within a budget proportional to its
body (:func:`text_budget`). The first value over a bound is refused at its JSON pointer; nothing is published.
"""

from __future__ import annotations

from dataclasses import dataclass

from metalake.urn import AssetUrn

# The bounds of io.metalake.asset.upserted.v1 (name, urn): a longer one could never become an event.
MAX_NAME = 1024
MAX_URN = 2048
# Spark's, Flink's and dbt's struct columns nest a handful deep; 32 leaves ample room and bounds the repetition.
MAX_NESTING = 32
# Names and URNs one event may build: a floor (a small event about a table with a long name and many columns) plus a
# multiple of its (decompressed) body. Legitimate events stay far below: a flat schema builds about one URN per field.
TEXT_FLOOR = 1 << 20
TEXT_PER_BODY_BYTE = 4


class InvalidLineage(ValueError):
    """The event is not one this endpoint can map; ``pointer`` is the JSON pointer (RFC 6901) of the value at fault."""

    def __init__(self, message: str, pointer: str) -> None:
        super().__init__(message)
        self.pointer = pointer or "/"


class TooManyEvents(ValueError):
    """The event would become more metalake events than ``connect.openlineage_max_events``, or more text than its
    budget; ``pointer`` is where the mapping stopped."""

    def __init__(self, message: str, pointer: str = "/") -> None:
        super().__init__(message)
        self.pointer = pointer or "/"


def text_budget(body_bytes: int) -> int:
    """The characters of names and URNs an event of ``body_bytes`` (decompressed) may build."""
    return TEXT_FLOOR + TEXT_PER_BODY_BYTE * max(body_bytes, 0)


@dataclass
class Budget:
    """The text one event has built so far, against its limit."""

    limit: int
    spent: int = 0

    def spend(self, chars: int, pointer: str) -> None:
        self.spent += chars
        if self.spent > self.limit:
            raise TooManyEvents(
                f"the event would build more than {self.limit} characters of names and URNs "
                f"(nested schema fields repeat their parents' names); stopped at {pointer}",
                pointer,
            )

    def column_name(self, prefix: str, name: str, pointer: str, depth: int) -> str:
        """``prefix + name``, refused before it is joined when it would be too long or too deep."""
        if depth > MAX_NESTING:
            raise InvalidLineage(f"{pointer}: schema fields nest more than {MAX_NESTING} deep", pointer)
        if len(prefix) + len(name) > MAX_NAME:
            at = f"{pointer}/name"
            raise InvalidLineage(f"{at}: the column name (with its parents') is longer than {MAX_NAME} characters", at)
        joined = f"{prefix}{name}"
        self.spend(len(joined), pointer)
        return joined

    def urn(self, urn: AssetUrn, pointer: str) -> str:
        """The URN's text, refused when an event could not hold it; counted against the budget."""
        text = str(urn)
        if len(text) > MAX_URN:
            raise InvalidLineage(f"{pointer}: the asset URN would be {len(text)} characters, over {MAX_URN}", pointer)
        self.spend(len(text), pointer)
        return text
