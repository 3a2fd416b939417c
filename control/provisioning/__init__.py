"""Provisioning a tenant: idempotent steps (``steps``), run and recorded in order (``provisioner``), where a
dedicated tenant's streaming query runs (``launcher``), and the queue the admin API fills and the lake worker drains
(``queue``: the tenants in ``provisioning`` or ``deleting`` themselves). See docs/tenants.md."""
