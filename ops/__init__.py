"""Operator tooling: the ``metalake`` command, the local stack of real services, and the demo.

Above every deployable (it may start any of them); nothing in ``metalake``, ``tenants``, ``connectors``,
``processors`` or ``api`` imports it.
"""
