"""What tracing costs the stream job's projection per event: ``EventSpans`` (processors/enrichment/tracing.py) over
synthetic rows, with the SDK's real pipeline (a ``BatchSpanProcessor`` and the OTLP/HTTP exporter to a receiver, the
stack's Jaeger by default), against tracing off (no SDK provider: what the job pays without an exporter).

Cases, each ``--events`` rows in micro-batches of ``--part`` rows, each inside a batch span:
- ``off``: no provider (the module's tracer is OpenTelemetry's no-op);
- ``unsampled``: a provider, every row's ``traceparent`` unsampled (a 1 % sampler's usual row);
- ``sampled``: a provider, every row's trace sampled (the local stack's default), at most 128 spans per batch.
CPU time of the process (``time.process_time``: the exporter's thread included) until every span is exported
(``force_flush``), divided by the events.

    .stack/venv/bin/python bench/trace_overhead.py --endpoint http://127.0.0.1:4318
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from processors.enrichment import tracing
from processors.enrichment.parse import ParsedRow
from processors.enrichment.tracing import EventSpans, SpanBudget


def _rows(n: int, flags: str) -> list[ParsedRow]:
    now = datetime.now(UTC)
    return [
        ParsedRow(
            tenant="bench",
            valid=True,
            event_id=f"e{i}",
            event_type="io.metalake.asset.upserted.v1",
            source="/bench",
            subject="urn:x",
            event_time=now,
            version=1,
            data="{}",
            reason=None,
            field=None,
            raw_key=None,
            raw_value=None,
            raw_headers=None,
            topic="t",
            partition=0,
            offset=i,
            kafka_time=now,
            traceparent=f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-{flags}",
        )
        for i in range(n)
    ]


def _run(rows: list[ParsedRow], part: int, tracer: trace.Tracer, flush: Callable[[], object]) -> float:
    started = time.process_time()
    for first in range(0, len(rows), part):
        batch = rows[first : first + part]
        with tracer.start_as_current_span("enrichment.projection_batch"), EventSpans(batch, SpanBudget()):
            pass
    flush()
    return (time.process_time() - started) / len(rows) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", default="http://127.0.0.1:4318", help="OTLP/HTTP receiver's base URL")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--part", type=int, default=1_000, help="rows of one micro-batch (1000)")
    args = parser.parse_args()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{args.endpoint}/v1/traces")))
    noop = trace.NoOpTracer()
    out: dict[str, float] = {}
    tracing.tracer = noop
    _run(_rows(args.part, "01"), args.part, noop, lambda: None)  # warm-up: first calls, imports
    out["off_us_per_event"] = _run(_rows(args.events, "01"), args.part, noop, lambda: None)
    tracing.tracer = provider.get_tracer("bench")
    sdk = provider.get_tracer("bench")
    out["unsampled_us_per_event"] = _run(_rows(args.events, "00"), args.part, sdk, provider.force_flush)
    out["sampled_us_per_event"] = _run(_rows(args.events, "01"), args.part, sdk, provider.force_flush)
    provider.shutdown()
    print(json.dumps({"events": args.events, "part": args.part, **{k: round(v, 2) for k, v in out.items()}}))


if __name__ == "__main__":
    main()
