"""What the admin API does behind its routes: reads of the MongoDB projection (``catalog``, ``lineage``), events it
publishes (``events``), the audit trail (``audit``), tenant (de)provisioning (``provisioning``), erasures
(``erasures``), SQL as the tenant (``sqlquery``) and share links (``shares``). Routes (``api.routes``) hold HTTP only,
bodies are in ``api.schemas``.
"""
