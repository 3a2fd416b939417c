"""The whole-platform freshness benchmark (``bench/platform_bench.py``): the soak's tenants and paced mixed load
(``bench/soak``), each sampled event timed from Kafka's acknowledgement to visible in MongoDB and through Trino SQL,
per table kind.

One job per module: ``probes`` (what to look for, per event kind and store), ``stores`` (how MongoDB and Trino are
asked), ``watch`` (the two pollers, with backoff), ``load`` (the soak's load, telling the probes what Kafka
acknowledged, plus an edit through the API), ``report`` (percentiles per kind and store, the JSON and the table).
"""
