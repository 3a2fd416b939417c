"""The outbound runtime: committed changes from ``metalake.changes`` delivered to Slack, Jira and signed webhooks.

``runtime`` consumes and commits, ``dispatch`` picks each tenant's matching subscriptions and retries, ``ledger``
makes deliveries idempotent, ``destination`` is the plugin interface (plugins registered by name in the
``metalake.outbound`` entry-point group). See docs/outbound.md.
"""
