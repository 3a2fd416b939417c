"""The processors: the deployables that work on what is in Kafka, each a package with its own entry point (its
``main.py``, a Typer app, also ``python -m processors.<name>``).

``enrichment`` (the Spark streaming job: event topics -> Delta and the MongoDB projection), ``lake`` (lake operations
and the erasure worker), ``propagation`` (tags along lineage), ``outbound`` (deliveries to Slack, Jira, Microsoft
Teams, Freshdesk and signed webhooks) and ``access`` (Trino access rules). The only package that imports pyspark
and delta (``enrichment`` and ``lake``); the others consume ``metalake.changes``. See docs/architecture.md.
"""
