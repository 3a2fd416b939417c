"""metalake's shared kernel: settings, the event envelope and registry, Kafka I/O, MongoDB access, telemetry.

The bottom layer: every deployable (``api``, ``connectors``, ``processors``), ``control``, ``tenants`` and ``catalog``
may import it; it imports none of them (import-linter enforces it). The tenant's metadata model over it (projection
documents, the records of ``metalake.changes``, tag propagation) is ``catalog``. The ``metalake`` command, the local
stack and the demo live in ``ops``.
"""

__version__ = "0.1.0"
