"""Dead letters a tenant admin can act on: read from the DLQ topics, shown without secrets, replayed once.

- :mod:`control.deadletters.topics` reads a tenant's letters from the shared DLQ topics (the connector worker's and
  the outbound runtime's), newest first, bounded per request;
- :mod:`control.deadletters.redact` decides what of a letter a person sees;
- :mod:`control.deadletters.replays` records replays in MongoDB, one per letter (a conditional insert);
- :mod:`control.deadletters.connectors` runs a connector worker's letter through the connector's *current*
  mapping and transforms; :mod:`control.deadletters.outbound` hands an outbound letter back to the outbound runtime.

In the control layer because the admin API replays (it holds the tenant check, the audit and the publisher) while
the stages that refused the records are other deployables. See docs/dead-letters.md.
"""
