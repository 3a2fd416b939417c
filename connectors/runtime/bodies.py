"""Reading a request body with a hard limit on the bytes actually read, before anything parses it."""

from __future__ import annotations

from fastapi import Request

from metalake.http.problems import Problem


def _too_large(limit: int) -> Problem:
    return Problem(413, "body-too-large", f"the request body exceeds the limit of {limit} bytes", field="body")


async def read_limited(request: Request, limit: int) -> bytes:
    """The body, or :class:`Problem` 413 as soon as more than ``limit`` bytes arrived.

    A declared ``Content-Length`` above the limit is refused without reading; the count on the stream is what holds,
    because the header may be absent (chunked) or wrong.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)
