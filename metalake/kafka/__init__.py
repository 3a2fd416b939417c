"""Kafka I/O: client configuration, the confirmed-delivery producer, the commit-after-side-effects consumer,
topic administration and dead-letter records."""

from metalake.kafka.admin import ensure_topics
from metalake.kafka.consumer import BatchConsumer, Received
from metalake.kafka.dlq import DeadLetter, dead_letter_record, read_dead_letter
from metalake.kafka.producer import Delivery, EventProducer, EventPublisher, PublishError, RawRecord

__all__ = [
    "BatchConsumer",
    "DeadLetter",
    "Delivery",
    "EventProducer",
    "EventPublisher",
    "PublishError",
    "RawRecord",
    "Received",
    "dead_letter_record",
    "ensure_topics",
    "read_dead_letter",
]
