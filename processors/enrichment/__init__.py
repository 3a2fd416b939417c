"""The Spark Structured Streaming job: Kafka -> per-tenant Delta tables -> MongoDB projection.

Pure record handling lives in ``parse``; Spark and store I/O in ``session``, ``tables``, ``writer``, ``projection`` and
``catalog``; ``main`` wires them together (``python -m processors.enrichment``).
"""
