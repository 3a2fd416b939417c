"""One folder per destination: its spec (what the control plane validates, no vendor SDK) beside its delivery code.

Keep these ``__init__`` modules free of imports: the admin API loads the specs (``<name>/spec.py``) through the
``metalake.outbound`` entry points, and importing a spec runs its packages' ``__init__`` first.
"""
