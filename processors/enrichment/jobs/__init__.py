"""Entry points of the Spark jobs (``python -m processors.enrichment.jobs.<name>``)."""
