"""The connector runtime: hosts webhook and source connectors of every tenant, like a Kafka Connect worker.

It owns what plugins never do: single-message transforms (``transforms``), error tolerance and dead letters
(``errors``), confirmed publishing (``publisher``), crawls (``source_runner``), the webhook receiver (``webhooks``) and
the app factory (``worker``). It reads its configuration, secrets and offsets from the control plane
(``control.connectors``), which the admin API writes; it serves no management routes.
"""
