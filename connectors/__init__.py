"""Inbound connectors: what publishes metadata change events to Kafka. The worker (``runtime``, ``main``: ``metalake
connect run``) serves Monte Carlo webhooks (``montecarlo``), the ingest API (``ingest``) and OpenLineage
(``openlineage``); source connectors crawl PostgreSQL catalogs (``postgres``) and import dbt artifacts (``dbt``).

They meet the rest of metalake only in Kafka, the control plane's stores (``control``), ``tenants``, ``catalog`` and
the kernel; they never import ``processors`` or ``api``. See docs/connectors/runtime.md.
"""
