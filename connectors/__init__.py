"""Inbound connectors: sources that publish metadata change events to Kafka (Monte Carlo, catalog crawler, ingest API).

They meet the rest of metalake only in Kafka, the stores and ``tenants``; they never import ``processors`` or ``api``.
"""
