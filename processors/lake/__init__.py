"""Lake operations run by hand or by schedulers: table maintenance, GDPR erase, projection reconcile, recent-window
pruning. One module per command (``python -m processors.lake.<command>``); ``metalake lake`` runs them as
subprocesses so the CLI never loads Spark. See docs/lake.md.
"""
