"""The propagation processor: consumes ``metalake.changes`` and publishes propagated/unpropagated tags.

``processor`` and ``run`` (the consumer loop, ``metalake propagation run``), ``events`` (what is published),
``erasure`` (the ``io.metalake.asset.erased.v1`` event). The semantics it applies (the closure, the per-tenant model,
the diff, the dry run) are in ``metalake.propagation``. See docs/propagation.md.
"""
