"""A consumed Kafka record as processors read it (key, headers, value, partition, offset), for unit tests."""

from __future__ import annotations


class Record:
    def __init__(
        self,
        headers: list[tuple[str, bytes]],
        value: bytes,
        partition: int = 0,
        offset: int = 0,
        key: bytes | None = None,
    ) -> None:
        self._headers, self._value, self._key = headers, value, key
        self._partition, self._offset = partition, offset

    def key(self) -> bytes | None:
        return self._key

    def headers(self) -> list[tuple[str, bytes]]:
        return self._headers

    def value(self) -> bytes:
        return self._value

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset
