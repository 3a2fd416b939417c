"""The control plane every deployable shares: the records in ``metalake_control`` (and the compacted offsets topic)
that the admin API writes and the connector worker and the processors read, with their validation.

Below the deployables (``api``, ``connectors``, ``processors`` may all import it; it imports none of them), above
``tenants``, ``catalog`` and the kernel. Nothing here imports Spark or a vendor SDK.
"""
