"""Interoperability: a run out to other tools, and the commands that move runs in and out.

* :mod:`cassettes.interop.otel` — OpenTelemetry GenAI spans (OTLP/JSON, OTLP/HTTP protobuf);
* :mod:`cassettes.interop.har` — HAR 1.2 (browser devtools, mitmweb);
* :mod:`cassettes.interop.textconv` — a stable line-per-item rendering for ``git diff``;
* :mod:`cassettes.interop.cli` — ``looptap import`` / ``export`` / ``textconv``.

Files read in (vcrpy cassettes, mitmproxy flows) are read by :mod:`cassettes.storage`.
"""

from __future__ import annotations
