"""The service an OTLP trace says it came from (the resource attribute ``service.name``), for the
imported cassette's header (``meta.service``): the fleet index names a run's agent from it when
no name was given (docs/fleet.md). Read as the spans are (:func:`read_docs`, the protobuf
decoder), bounded; an SDK's default name (``unknown_service``, ``unknown_service:python``: no
name set) is none."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from cassettes.errors import ImportFormatError
from cassettes.interop._documents import read_docs
from cassettes.interop._otlp_spans import _proto_docs, attributes
from cassettes.recording import valid_agent

__all__ = ["trace_service"]


def trace_service(path: Path, kind: str) -> dict[str, str]:
    """``{"service": NAME}`` for the header of a run imported from the OTLP file ``path`` (the
    service of most of its spans), or ``{}`` (not OTLP, no name set, not readable)."""
    if kind not in ("otlp", "otlp-proto"):
        return {}
    names = Counter[str]()
    try:
        docs = _proto_docs(path) if kind == "otlp-proto" else read_docs(path)
        for _, doc in docs:
            for rs in _resource_spans(doc):
                name = valid_agent(
                    attributes((rs.get("resource") or {}).get("attributes")).get("service.name")
                )
                if name is not None and not name.startswith("unknown_service"):
                    names[name] += sum(
                        len(ss.get("spans") or []) for ss in _scopes(rs) if isinstance(ss, dict)
                    )
    except (ImportFormatError, OSError, AttributeError, TypeError):
        return {}
    return {"service": names.most_common(1)[0][0]} if names else {}


def _resource_spans(doc: Any) -> list[dict[str, Any]]:
    if not isinstance(doc, dict):
        return []
    found = doc.get("resourceSpans") or doc.get("resource_spans") or []
    return [rs for rs in found if isinstance(rs, dict)] if isinstance(found, list) else []


def _scopes(rs: dict[str, Any]) -> list[Any]:
    scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
    return scopes if isinstance(scopes, list) else []
