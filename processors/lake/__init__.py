"""Lake operations on the Delta tables and the MongoDB projection: maintenance, GDPR erase, reconcile, pruning of the
recent window, a tenant's tables created or dropped, and the worker that runs the erasures and the tenant provisioning
the admin API queues.

``main`` is the one Typer app (``python -m processors.lake <command>``; ``metalake lake <command>`` loads it only when
invoked): ``maintain``, ``erase`` (with ``scope`` and ``purge``), ``reconcile`` (with ``diff``), ``prune`` (with
``window``), ``init``, ``drop``, ``worker`` (each erasure a ``python -m processors.lake erase`` child process;
``provisioning``, its tenant side: the steps of ``control.provisioning``, ``init --dedicated`` and ``drop`` as child
processes). ``runner`` reports to the operator, ``discover`` finds the tenants, ``sparkio`` holds the shared Spark side.
The admin API only queues, so it never starts Spark nor any subprocess. See docs/lake.md.
"""
