"""Provisioning a tenant: idempotent steps (``steps``), run and recorded in order (``provisioner``), and where a
dedicated tenant's streaming query runs (``launcher``); the API's background work under a lease per item (``runs``)
and its resumption after a crash (``resume``). See docs/tenants.md."""
