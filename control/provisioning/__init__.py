"""Provisioning a tenant: idempotent steps (``steps``), run and recorded in order (``provisioner``), where a
dedicated tenant's streaming query runs (``launcher``), and the queue the admin API fills and the lake worker drains
(``queue``: the tenant documents themselves), with its section of the settings (``settings``). See docs/tenants.md."""
