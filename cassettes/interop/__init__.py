"""Interoperability: a run out to other tools and traffic in from them.

* :mod:`cassettes.interop.otel` — OpenTelemetry GenAI spans (OTLP/JSON, OTLP/HTTP protobuf);
* :mod:`cassettes.interop.har` — HAR 1.2 (browser devtools, mitmweb);
* :mod:`cassettes.interop.textconv` — a stable line-per-item rendering for ``git diff``;
* :mod:`cassettes.interop.mitmflow` — mitmproxy flow files in (no mitmproxy needed).
"""

from __future__ import annotations
