"""Trino access rules kept in step with the control plane and the tenants' PII tags (``metalake access``).

``columns`` reads a tenant's tagged columns from MongoDB, ``catalog`` asks Trino which tables and column types a
tenant's schema holds, ``sync`` renders and writes the rules file, ``runner`` regenerates it as
``metalake.changes`` reports classification and propagated-tag changes. See docs/serving.md.
"""
