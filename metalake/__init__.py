"""metalake's shared kernel: settings, the event envelope, Kafka I/O, telemetry, the local stack and the CLI."""

__version__ = "0.1.0"
