"""The generic ingest API: ``POST /v1/events`` for any producer, authenticated by a per-tenant write key or an OAuth
access token with ``events:write``."""

from connectors.ingest.routes import router

__all__ = ["router"]
