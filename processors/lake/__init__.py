"""Lake operations on the Delta tables and the MongoDB projection: maintenance, GDPR erase, reconcile, pruning of the
recent window, a tenant's tables created or dropped, and the worker that runs the erasures the admin API queues.

``main`` is the one Typer app (``python -m processors.lake <command>``; ``metalake lake <command>`` loads it only when
invoked): ``maintain``, ``erase`` (with ``scope`` and ``purge``), ``reconcile`` (with ``diff``), ``prune`` (with
``window``), ``init``, ``drop``, ``worker`` (each erasure a ``python -m processors.lake erase`` child process).
``runner`` reports to the operator, ``discover`` finds the tenants, ``sparkio`` holds the shared Spark side. The admin
API runs ``init`` and ``drop`` as subprocesses and only queues erasures, so it never starts Spark. See docs/lake.md.
"""
