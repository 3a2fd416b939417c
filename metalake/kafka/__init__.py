"""Kafka I/O: client configuration, the confirmed-delivery producer, the commit-after-side-effects consumer,
topic administration and dead-letter records."""

from metalake.kafka.admin import ensure_topics
from metalake.kafka.consumer import BatchConsumer
from metalake.kafka.dlq import DeadLetter, dead_letter_headers
from metalake.kafka.producer import Delivery, EventProducer, PublishError, RawRecord

__all__ = [
    "BatchConsumer",
    "DeadLetter",
    "Delivery",
    "EventProducer",
    "PublishError",
    "RawRecord",
    "dead_letter_headers",
    "ensure_topics",
]
