"""The tenant-admin API (FastAPI). It never loads Spark (import-linter: no pyspark or delta, also through what it
imports): Spark work runs as ``python -m processors.lake.<command>`` subprocesses. It imports only Spark-free parts
of ``connectors`` and ``processors`` (the connector offsets store, the Trino access sync)."""
