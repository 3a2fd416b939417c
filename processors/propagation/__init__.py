"""The propagation processor: consumes ``metalake.changes`` and publishes propagated/unpropagated tags.

``processor`` (the batch handler), ``main`` (the entry point, ``python -m processors.propagation``, also
``metalake propagation``), ``events`` (what is published), ``erasure`` (the ``io.metalake.asset.erased.v1`` event).
The semantics it applies (the closure, the per-tenant model, the diff, the dry run) are in ``catalog.propagation``.
See docs/propagation.md.
"""
