"""The connector runtime: hosts webhook and source connectors of every tenant, like a Kafka Connect worker.

It owns what plugins never do: configuration and secrets (``control``), single-message transforms (``transforms``),
error tolerance and dead letters (``errors``), confirmed publishing (``publisher``), source offsets (``offsets``),
crawls (``source_runner``), the webhook receiver (``webhooks``), the management API (``management``) and the app
factory (``worker``).
"""
