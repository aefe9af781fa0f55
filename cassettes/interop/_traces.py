"""Production traces in: chat trajectories and OTLP traces (OTel GenAI semantic conventions,
OpenInference) read as model calls (:class:`~cassettes.providers.Call`), each rebuilt as
the round trip the API would have carried and marked as reconstructed (docs/interop.md).

Told apart by content (:func:`sniff`): a JSON list, or an object holding ``messages`` / ``traj`` /
``trajectory``, is a trajectory (one a line in JSON Lines: one cassette each); an object holding
``resourceSpans`` is an ``ExportTraceServiceRequest`` (one a line, as the OTel file exporter and
collectors write them); a file that is neither text nor any other format looptap reads is tried as
OTLP protobuf. Bounded: a JSON document (a whole file, or a line) over
:data:`~cassettes.bounds.MAX_DECODED_BYTES` is refused, never read whole; JSON Lines are read a
line at a time.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from ..hints import count
from ..providers import Call, exchange, link_items
from ..recording.pipeline import CassetteWriter
from ..storage import staged
from ._documents import read_docs
from ._otlp_in import UNPROFILED_NOTE, otlp_calls
from ._trajectory import trajectory_calls

__all__ = ["import_runs", "runs_in", "sniff"]

_HISTORY_KEYS = ("messages", "traj", "trajectory")
_FIRST_KEY = re.compile(rb'\s*\{\s*"((?:[^"\\]|\\.)*)"')


def sniff(head: bytes) -> str | None:
    """``"trajectory"``, ``"otlp"`` (JSON) or ``"otlp-proto"`` for the first bytes of a file of
    those, ``None`` for anything else (a looptap cassette, a vcrpy cassette, a HAR …)."""
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"["):  # a list of messages, or of trajectories
        return "trajectory" if text[1:].lstrip()[:1] in (b"{", b"[") else None
    if text.startswith(b"{"):
        m = _FIRST_KEY.match(text)
        if m is not None and m.group(1) in (b"type", b"log", b"interactions", b"version"):
            return None  # a looptap header, a HAR, a vcrpy cassette in JSON
        if any(k in text for k in (b'"resourceSpans"', b'"resource_spans"', b'"resourceLogs"')):
            return "otlp"
        if any(b'"%s"' % k.encode() in text for k in _HISTORY_KEYS):
            return "trajectory"
        return None
    # OTLP protobuf: field 1 (resource_spans), length-delimited, and not text.
    if head[:1] == b"\x0a" and (b"\x00" in head or not _printable(head)):
        return "otlp-proto"
    return None


def _printable(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# -- trajectories --------------------------------------------------------------------------------


def _trajectories(doc: Any, where: str) -> Iterator[tuple[list[Any], dict[str, Any]]]:
    """(messages, the object around them) of each trajectory one document holds."""
    if isinstance(doc, list) and all(isinstance(m, dict) and "role" in m for m in doc):
        yield doc, {}
        return
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            yield from _trajectories(item, f"{where}, item {i}")
        return
    if isinstance(doc, dict):
        for key in _HISTORY_KEYS:
            if isinstance(doc.get(key), list):
                yield doc[key], doc
                return
    raise ImportFormatError(
        f"{where}: not a chat trajectory (a list of messages with roles, or an object holding "
        "one under 'messages', 'traj' or 'trajectory')"
    )


# -- the runs of a file ---------------------------------------------------------------------------


def runs_in(path: Path, kind: str, logs: tuple[Path, ...] = ()) -> Iterator[list[Call]]:
    """The runs ``path`` holds (one list of model calls each): a trajectory file may hold several,
    an OTLP file is one run. Raises :class:`ImportFormatError`: one line saying what is wrong."""
    if kind == "trajectory":
        for n, doc in read_docs(path):
            where = f"{path}, line {n}" if n else str(path)
            for k, (messages, around) in enumerate(_trajectories(doc, where)):
                calls = trajectory_calls(messages, around, where if not k else f"{where} #{k}")
                if not calls:
                    raise ImportFormatError(
                        f"{where}: a trajectory without an assistant message (no model call to "
                        "rebuild); nothing imported"
                    )
                yield calls
        return
    yield otlp_calls(path, kind, logs)


def import_runs(
    path: Path, kind: str, targets: list[Any], logs: tuple[Path, ...] = ()
) -> list[str]:
    """Write each run of ``path`` as a cassette at its checked target (one each, in order), each
    under a private name put in place whole (an OTLP trace's spans joined to the event records
    of ``logs``); the summary lines."""

    lines = []
    runs = runs_in(path, kind, logs)
    for target, calls in zip(targets, runs, strict=False):
        target.path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"source": f"import ({kind})", "imported_from": path.name}
        services = Counter(c.service for c in calls if c.service)
        if services:  # service.name, of most of its calls: the fleet's agent (docs/fleet.md)
            meta["service"] = services.most_common(1)[0][0]
        inferred: set[str] = set()
        link_items(calls)
        with staged(target) as s, CassetteWriter(s.path, meta=meta) as w:
            for n, call in enumerate(calls):
                ex = exchange(call, n)
                inferred |= set((ex.reconstructed or {}).get("inferred", ()))
                w.append(ex)
        said = f"; inferred: {', '.join(sorted(inferred))}" if inferred else ""
        lines.append(
            f"{path} → {target.path}: {count(len(calls), 'round trip')} rebuilt from "
            f"{_KINDS.get(kind, kind)}"
            f"{said}{_limits(calls)}"
        )
        unknown = sorted({n for c in calls for n in c.notes if n.startswith(UNPROFILED_NOTE[:24])})
        lines.extend("S" + n.removeprefix("imported: s") for n in unknown[:1])
    return lines


_KINDS = {"trajectory": "a trajectory", "otlp": "OTLP/JSON", "otlp-proto": "OTLP protobuf"}


def _limits(calls: list[Call]) -> str:
    """What cannot be done with a run whose trace kept no message content."""
    bare = sum(1 for c in calls if {"messages", "output"} <= c.inferred)
    if not bare:
        return ""
    if bare < len(calls):  # the rest have theirs: said of these only
        return (
            f" ({bare} of {count(len(calls), 'round trip')} without message content in the "
            "trace: models, usage and timing only for those)"
        )
    return (
        " (no message content in the trace: models, usage and timing only; turns, tool calls, "
        "findings on what was said, fork and replay need the messages)"
    )
