"""Processing: the Spark streaming jobs (``processors.enrichment``) and, later, the outbound runtime.

The only package that imports pyspark.
"""
