"""The outbound runtime: committed changes from ``metalake.changes`` delivered to Slack, Jira, Microsoft Teams,
Freshdesk and signed webhooks, per each tenant's subscriptions.

``runtime/`` consumes, dispatches, retries and keeps the delivery ledger; ``destinations/<name>/`` holds one kind of
destination each: its spec (what the control plane validates, registered in the ``metalake.outbound`` entry-point
group) beside its delivery code and vendor SDK. ``main`` is the process (``metalake outbound run``). See
docs/outbound.md.
"""
