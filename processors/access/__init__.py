"""The access processor: ``processor`` (the consumer, ``AccessRunner``) and ``main`` (the entry point,
``python -m processors.access``, also ``metalake access``). It regenerates the Trino access rules as
``metalake.changes`` reports classification and propagated-tag changes.

The rendering itself (``tenants.access``: the rules, the tagged columns, Trino's catalog, the sync) is shared with
tenant provisioning in the admin API and ``metalake access sync``. See docs/serving.md.
"""
