"""The tenant's metadata model and its semantics: what the stores hold of a tenant's assets, shared by the
deployables that write it and those that read it.

``projection`` (the documents of a tenant's MongoDB projection, one collection per kind of current state, and the one
rule that lays a person's edits over a source's values), ``urn_keys`` (the normalised URNs the tag documents carry for
exact, indexed lookups, and their backfill), ``changes`` (the records of ``metalake.changes``: what the stores
committed, for the processes that react to it) and ``propagation`` (tags along column-level lineage: the closure, the
per-tenant model, the diff, the dry run).

Between ``tenants`` and the kernel: ``tenants``, ``control`` and the deployables may import it; it imports only the
kernel (``metalake``), which imports nothing of it (import-linter). Three model-like pieces stay in the kernel because
the event envelope needs them for every event it builds or decodes, and the Kafka producer and dead letters carry that
envelope: the URN scheme (``metalake.urn``: every URN of an event is canonicalised), what a tenant id may be
(``metalake.tenancy``) and the registry of event types and their schemas (``metalake.events``). The state tables' specs
and fold belong to the streaming job, their one writer (``processors.enrichment.state``).
"""
