"""What the admin API does behind its routes: reads of the MongoDB projection (``catalog``, ``lineage``), events it
publishes (``events``), the audit trail (``audit``), its background sweep (``resume``), erasures (``erasures``, queued
only), SQL as the tenant (``sqlquery``), share links (``shares``), connectors with their secrets and offsets
(``connectors``) and outbound subscriptions with their test sends (``subscriptions``). Routes (``api.routes``) hold HTTP
only, bodies are in ``api.schemas``.
"""
