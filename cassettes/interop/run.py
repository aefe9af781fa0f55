"""A run loaded for a command: raw exchanges, their parsed view and the layer analysis.

A looptap cassette is read as a stream (:class:`~cassettes.index.IncrementalRun`): one pass
analyses it, keeping the turns' summaries and an index of byte offsets, and every later pass reads
the round trips again from disk one at a time. So ``show``, ``textconv`` and the exports hold one
round trip at a time, not the run: a million tiny records cost megabytes. Imports (vcrpy YAML,
mitmproxy flow files) are loaded whole; they are small by nature and bounded by their loaders.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from cassettes.analysis import RunAnalysis, analyse
from cassettes.exchange import Exchange
from cassettes.roundtrip import RoundTrip, parse_all

__all__ = ["Run", "load_run", "run_from_exchanges", "timeline"]

T = TypeVar("T", covariant=True)


class Records(Sized, Iterable[T], Protocol[T]):
    """A run's round trips in recording order: a list, or a column read again from disk on every
    pass (see :class:`~cassettes.index.Reread`)."""

    def __iter__(self) -> Iterator[T]: ...


@dataclass
class Run:
    #: What the run was read from (shown in exports; never used for identity).
    name: str
    exchanges: Records[Exchange]
    roundtrips: Records[RoundTrip]
    #: ``analysis.turns`` may be a lazy mapping (turns restored one at a time): read it with
    #: ``[]``, ``get`` and ``in``; never hold all of it.
    analysis: RunAnalysis
    #: The cassette header (``{}`` for inputs that have none, like vcrpy YAML).
    header: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: Epoch seconds to lay out round trips whose start time was not recorded (imports): the
    #: cassette's creation time, so an export of the same file is the same every time.
    epoch: float = 0.0
    #: Round trips by API family ("none" for traffic that is not an LLM API's).
    families: dict[str, int] = field(default_factory=dict)
    #: Finds one round trip by seq without a pass over the run (set by :func:`stream_run`).
    finder: Callable[[int], tuple[Exchange, RoundTrip] | None] | None = None

    def roundtrip(self, seq: int) -> tuple[Exchange, RoundTrip] | None:
        """The exchange and parsed round trip with this seq, if the run holds it."""
        if self.finder is None:
            by_seq = {ex.seq: (ex, rt) for ex, rt in zip(self.exchanges, self.roundtrips, strict=True)}
            self.finder = by_seq.get
        return self.finder(seq)


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
    families: dict[str, int] = {}
    for rt in rts:
        families[rt.family] = families.get(rt.family, 0) + 1
    return Run(name, exchanges, rts, analyse(exchanges, rts), hdr, list(problems or []), epoch, families)


def stream_run(path: str | Path) -> Run:
    """A looptap cassette analysed in one pass and read again, a round trip at a time, on each
    later pass. Raises :class:`~cassettes.errors.CassetteError` for a file that is not one."""
    from cassettes.errors import CassetteFormatError
    from cassettes.index import IncrementalRun

    p = Path(path)
    inc = IncrementalRun(p)
    while not inc.step().at_end:
        pass
    try:
        inc.finish()
    except CassetteFormatError as exc:  # nothing but an unfinished header line
        raise CassetteFormatError(str(exc)) from None
    inc.analyser.release()  # the run is complete: keep its analysis, not the analyser's working state
    a = inc.analysis
    again = inc.reread()
    turns: Mapping[int, Any] = again.turns
    analysis = RunAnalysis.model_construct(conversations=a.conversations, turns=turns, findings=a.findings, errors=a.errors, mcp_calls=a.mcp_calls)
    header = inc.index.header or {}
    epoch = _created(header)
    if epoch is None:
        epoch = inc.first_started if inc.first_started is not None else 0.0
    problems = [str(x) for x in inc.problems]
    return Run(p.name, again.exchanges, again.roundtrips, analysis, header, problems, epoch, dict(inc.families), again.find)


def load_run(path: str | Path) -> Run:
    """A looptap cassette, or a vcrpy YAML cassette or mitmproxy flow file (imported on the fly).
    Raises :class:`~cassettes.errors.CassetteError` for a file that is none of them."""
    from cassettes.interop.mitmflow import is_flow_file, load_flows
    from cassettes.vcr import load_vcr

    p = Path(path)
    try:
        with p.open("rb") as fh:
            head = fh.read(32)
    except OSError:
        head = b""  # the reader below says why the file cannot be read
    if is_flow_file(head):
        return run_from_exchanges(load_flows(p).exchanges, p.name)
    if p.suffix.lower() in (".yaml", ".yml"):
        run = run_from_exchanges(load_vcr(p), p.name)
        if not run.epoch:  # no header, no recorded start: lay the run out at the file's time
            run.epoch = p.stat().st_mtime
        return run
    return stream_run(p)


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
