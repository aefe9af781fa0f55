"""tests/why/why_agent.py (a real-SDK tool loop, optionally with a sub-agent) traced by a real
instrumentation of the openai SDK, its spans written at exit as one OTLP/JSON
``ExportTraceServiceRequest`` line (hex ids, as the OTLP file exporter writes them) and as OTLP
protobuf beside it (``OUT.pb``):

    python traced_agent.py openai-v2|openinference OUT.json [why_agent.py's arguments …]
"""

from __future__ import annotations

import atexit
import base64
import json
import runpy
import sys
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

AGENT = Path(__file__).resolve().parents[1] / "why" / "why_agent.py"


def _hex_ids(v: Any) -> Any:
    """protobuf's JSON form spells bytes in base64; OTLP/JSON spells ids in hex."""
    if isinstance(v, dict):
        return {
            k: base64.b64decode(x).hex()
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(x, str)
            else _hex_ids(x)
            for k, x in v.items()
        }
    return [_hex_ids(x) for x in v] if isinstance(v, list) else v


def main() -> None:
    kind, out = sys.argv[1], Path(sys.argv[2])
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if kind == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        OIInstrumentor().instrument(tracer_provider=provider)

    def write() -> None:
        from google.protobuf.json_format import MessageToDict

        req = encode_spans(exporter.get_finished_spans())
        out.with_suffix(".pb").write_bytes(req.SerializeToString())
        out.write_text(json.dumps(_hex_ids(MessageToDict(req))) + "\n")

    atexit.register(write)
    sys.argv = [str(AGENT), *sys.argv[3:]]
    runpy.run_path(str(AGENT), run_name="__main__")


if __name__ == "__main__":
    main()
