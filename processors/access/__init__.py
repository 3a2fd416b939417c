"""The access processor (``metalake access run``): regenerates the Trino access rules as ``metalake.changes`` reports
classification and propagated-tag changes.

The rendering itself (``tenants.access``: the rules, the tagged columns, Trino's catalog, the sync) is shared with
tenant provisioning in the admin API and ``metalake access sync``. See docs/serving.md.
"""
