"""Tenants' outbound subscriptions: the records (``store``), what they filter on (``filters``) and what each kind of
destination accepts as configuration and secrets (``destinations``, the specs registered in the ``metalake.outbound``
entry-point group). The admin API writes subscriptions with these, the outbound runtime reads them. See
docs/outbound.md.
"""
