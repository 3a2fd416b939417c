"""The tenant-admin API (FastAPI): ``main`` (``python -m api``, ``metalake api``), ``app`` (the app factory and
``ROUTERS``), ``routes`` over ``schemas`` over ``services``, and ``auth`` (the OAuth 2 authorization server).

It imports no other deployable (``connectors``, ``processors``: import-linter) and never loads Spark (no pyspark or
delta, also through what it imports): provisioning runs ``python -m processors.lake init --dedicated`` and
``python -m processors.lake drop`` as subprocesses, and GDPR erasures are only queued, for the lake worker. See
docs/api.md.
"""
