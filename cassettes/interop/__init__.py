"""Interoperability: a run out to other tools, and the commands that move runs in and out. One
façade, its names pinned by tests/interop/test_interop_surface.py, over:

- ``_otel``: OpenTelemetry GenAI spans (OTLP/JSON), their attributes in ``_span_attributes``;
  ``_otlp``: the same as OTLP/HTTP protobuf, and the POST;
- ``_har``: HAR 1.2 (browser devtools, mitmweb);
- ``_textconv``: a stable line-per-item rendering for ``git diff``;
- ``_traces``: trace files read in as runs (OTLP spans: ``_otlp_in``, ``_otlp_spans``,
  ``_documents``);
- ``_command``: ``looptap export`` / ``textconv``.

Files read in (vcrpy cassettes, mitmproxy flows) are read by :mod:`cassettes.storage`.
"""

from __future__ import annotations

from ._command import cmd_export, cmd_textconv
from ._har import har_chunks
from ._otel import iter_requests
from ._otlp import batches, encode_request, traces_url
from ._textconv import render
from ._traces import import_runs, runs_in, sniff

__all__ = [
    "batches",
    "cmd_export",
    "cmd_textconv",
    "encode_request",
    "har_chunks",
    "import_runs",
    "iter_requests",
    "render",
    "runs_in",
    "sniff",
    "traces_url",
]
