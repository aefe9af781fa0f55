"""A run loaded for export: raw exchanges, their parsed view and the layer analysis."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cassettes.analysis import RunAnalysis, analyse
from cassettes.exchange import Exchange
from cassettes.roundtrip import RoundTrip, parse_all

__all__ = ["Run", "load_run", "run_from_exchanges", "timeline"]


@dataclass
class Run:
    #: What the run was read from (shown in exports; never used for identity).
    name: str
    exchanges: list[Exchange]
    roundtrips: list[RoundTrip]
    analysis: RunAnalysis
    #: The cassette header (``{}`` for inputs that have none, like vcrpy YAML).
    header: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: Epoch seconds to lay out round trips whose start time was not recorded (imports): the
    #: cassette's creation time, so an export of the same file is the same every time.
    epoch: float = 0.0


def _created(header: dict[str, Any]) -> float | None:
    created = header.get("created")
    if not isinstance(created, str):
        return None
    try:
        return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def run_from_exchanges(
    exchanges: list[Exchange], name: str = "<run>", header: dict[str, Any] | None = None, problems: list[str] | None = None
) -> Run:
    for i, ex in enumerate(exchanges):
        if ex.seq is None:
            ex.seq = i
    rts = parse_all(exchanges)
    hdr = header or {}
    epoch = _created(hdr)
    if epoch is None:
        epoch = next((ex.started for ex in exchanges if ex.started is not None), 0.0)
    return Run(name, exchanges, rts, analyse(exchanges, rts), hdr, list(problems or []), epoch)


def load_run(path: str | Path) -> Run:
    """A looptap cassette, or a vcrpy YAML cassette or mitmproxy flow file (imported on the fly).
    Raises :class:`~cassettes.errors.CassetteError` for a file that is none of them."""
    from cassettes.interop.mitmflow import is_flow_file, load_flows
    from cassettes.store import read_cassette
    from cassettes.vcr import load_vcr

    p = Path(path)
    try:
        with p.open("rb") as fh:
            head = fh.read(32)
    except OSError:
        head = b""  # read_cassette below says why the file cannot be read
    if is_flow_file(head):
        return run_from_exchanges(load_flows(p).exchanges, p.name)
    if p.suffix.lower() in (".yaml", ".yml"):
        run = run_from_exchanges(load_vcr(p), p.name)
        if not run.epoch:  # no header, no recorded start: lay the run out at the file's time
            run.epoch = p.stat().st_mtime
        return run
    cas = read_cassette(p)
    return run_from_exchanges(cas.exchanges, p.name, cas.header, [str(x) for x in cas.problems])


def _length(ex: Exchange) -> float:
    """How long the round trip took: its recorded duration, else the last chunk's offset, else
    the time to the response headers, else 0."""
    if ex.duration is not None:
        return max(ex.duration, 0.0)
    last = max((o for o, _ in ex.response_chunks if o is not None), default=None)
    if last is not None:
        return max(last, 0.0)
    return max(ex.ttfb or 0.0, 0.0)


def timeline(run: Run) -> list[tuple[float, float, bool]]:
    """``(start, seconds, synthetic)`` per exchange. A round trip without a recorded start (an
    import) is laid out after the previous one, from the run's epoch, so the layout is the same
    on every export of the same file."""
    out: list[tuple[float, float, bool]] = []
    cursor = run.epoch
    for ex in run.exchanges:
        length = _length(ex)
        if ex.started is None:
            out.append((cursor, length, True))
            cursor += length + 0.001
        else:
            out.append((ex.started, length, False))
            cursor = max(cursor, ex.started + length)
    return out
