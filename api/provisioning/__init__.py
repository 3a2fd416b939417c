"""Provisioning a tenant: idempotent steps (``steps``), run and recorded in order (``provisioner``), and where a
dedicated tenant's streaming query runs (``launcher``). See docs/tenants.md."""
