"""Secrets that travel in a URL path never reach a log line: one redaction for every route that carries one.

A share link's id (``/share/{share_id}/...``) and an engine's key (``/v1/opa/{key}/...``) are credentials in the
path, because their callers (a browser or spreadsheet, Trino's OPA plugin) can send nothing else. uvicorn's access
log writes every request's path. A route declares its secret segment where it declares its path, with
:func:`secret_path`; :class:`RedactSecretPaths`, installed on uvicorn's loggers by ``create_app``, rewrites every
declared segment as ``***`` (keeping a public prefix the route names, such as an engine key's id), and the API's own
log lines that name a path pass it through :func:`redact_path`.
"""

from __future__ import annotations

import logging
import re

# The declared secret segments: (the path up to the segment, the public prefix kept, the secret itself).
_DECLARED: list[re.Pattern[str]] = []
_PARAM = re.compile(r"\{[^}]+\}")
_LOGGERS = ("uvicorn.access", "uvicorn.error")


def _literal(template: str) -> str:
    # Other path parameters match one segment; the rest is literal.
    parts = _PARAM.split(template)
    return '[^/\\s"?]+'.join(re.escape(p) for p in parts)


def secret_path(template: str, param: str, *, keep: str = "") -> str:
    """Declare ``{param}`` of the route path ``template`` a secret and return ``template``: in logs the segment is
    shown as ``<keep>***`` when it starts with a match of the ``keep`` pattern, else as ``***``."""
    before, found, _ = template.partition("{" + param + "}")
    if not found:
        raise ValueError(f"{template} has no {{{param}}}")
    kept = f"(?P<keep>{keep})?" if keep else "(?P<keep>)"
    _DECLARED.append(re.compile(f'(?P<before>{_literal(before)}){kept}[^/\\s"?]+'))
    return template


def _masked(match: re.Match[str]) -> str:
    return match.group("before") + (match.group("keep") or "") + "***"


def redact_path(text: str) -> str:
    """``text`` with every declared secret path segment masked."""
    for pattern in _DECLARED:
        text = pattern.sub(_masked, text)
    return text


class RedactSecretPaths(logging.Filter):
    """Masks the declared secret path segments in a record's message and arguments (uvicorn's access log line is
    ``'%s - "%s %s HTTP/%s" %d'`` with the path an argument)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_path(a) if isinstance(a, str) else a for a in record.args)
        if isinstance(record.msg, str):
            record.msg = redact_path(record.msg)
        return True


def install() -> None:
    """Add the filter to uvicorn's loggers, once per process."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecretPaths) for f in logger.filters):
            logger.addFilter(RedactSecretPaths())
