"""The Spark Structured Streaming job: Kafka -> per-tenant Delta tables -> MongoDB projection.

Pure record handling lives in ``parse``; Spark and store I/O in ``session``, ``tables``, ``writer``, ``projection`` and
``catalog``; ``jobs.stream`` wires them together.
"""
