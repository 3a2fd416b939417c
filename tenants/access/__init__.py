"""Each tenant's Trino access: ``rules`` (the file-based access-control rules: a tenant's users see only its schema,
PII-tagged columns masked without the PII role), ``columns`` (a tenant's tagged columns from MongoDB), ``catalog``
(the tables and column types Trino holds for a tenant), ``sync`` (renders and writes the rules file from the control
plane). Used by tenant provisioning, ``metalake access sync`` and the access processor. See docs/serving.md.
"""
