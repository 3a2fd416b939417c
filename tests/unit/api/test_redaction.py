"""Secrets that travel in a path (share link ids, engine keys) never reach uvicorn's access log: one redaction, the
routes declaring which segment is secret."""

from __future__ import annotations

import logging

import pytest
from fastapi.routing import iter_route_contexts

from api.redaction import redact_path
from tests._support.api_app import build_app

_LINE = '%s - "%s %s HTTP/%s" %d'


def _logged(caplog: pytest.LogCaptureFixture, path: str) -> str:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        logging.getLogger("uvicorn.access").info(_LINE, "203.0.113.9:5", "GET", path, "1.1", 200)
    return caplog.text


def test_share_ids_and_engine_keys_never_reach_the_access_log(caplog: pytest.LogCaptureFixture) -> None:
    build_app()  # create_app installs the filter on uvicorn's loggers
    shared = _logged(caplog, "/share/Zq3-s3cretLinkId_x/data.csv?download=1")
    assert "s3cretLinkId" not in shared and '"GET /share/***/data.csv?download=1 HTTP/1.1" 200' in shared
    # Behind a proxy's prefix too, and whatever the extension asked for.
    assert "s3cret" not in _logged(caplog, "/api/share/s3cret/data.parquet")
    engine = _logged(caplog, "/v1/opa/mle_0123456789abcdef_TOPSECRET/allow")
    assert "TOPSECRET" not in engine and "/v1/opa/mle_0123456789abcdef_***/allow" in engine
    # A malformed key is masked whole; other paths pass as they are.
    assert "junkkey" not in _logged(caplog, "/v1/opa/junkkey/batch")
    assert "/v1/tenants/acme/shares/abc" in _logged(caplog, "/v1/tenants/acme/shares/abc")


def test_every_route_with_a_secret_segment_declared_it() -> None:
    app, _ = build_app()
    paths = {c.path or "" for c in iter_route_contexts(app.routes)}
    share = next(p for p in paths if p.startswith("/share/"))
    assert "SECRET" not in redact_path(share.format(share_id="SECRET", extension="csv"))
    opa = [p for p in paths if p.startswith("/v1/opa/")]
    assert opa and all("SECRET" not in redact_path(p.format(key="mle_0123456789abcdef_SECRET")) for p in opa)
