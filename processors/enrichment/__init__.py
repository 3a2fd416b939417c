"""The Spark Structured Streaming job: the event topics -> Delta (one lake query) and -> MongoDB (one projection query
per topic class), then ``metalake.changes``.

``main`` plans and supervises the queries (``python -m processors.enrichment``, ``metalake job``). The lake query's
``foreachBatch`` is ``lake`` (parse, fold and health on executors through ``rows``; Delta commits from the driver,
``commits``, under ``single_writer``'s leases on S3; tenants registered in Trino by ``registrar``); the projection
queries' is ``projector`` (records parsed on the driver, ``projection``'s version-guarded upserts, then ``changes``
and ``classify``'s automatic PII tags published). Shared: ``parse`` (pure record handling), ``state`` (the state
specs and their fold), ``health``, ``tables`` (schemas, ``Layout``), ``admission`` (tenants being deleted),
``session`` and ``shipping`` (the SparkSession, the code shipped to a cluster), ``freshness`` and ``lag`` (metrics).
See docs/streaming.md.
"""
