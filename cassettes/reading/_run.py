"""Reading a run: :func:`open_run`, the one entry point, and the one :class:`Run` every command,
the pytest plugin and the MCP server use (both exported from :mod:`cassettes`).

    run = open_run("run.jsonl")        # or a vcrpy cassette, or a mitmproxy flow file
    run.assert_no_findings(layer="C")
    for ex, rt in run.pairs: ...       # recording order, one round trip at a time
    run.by_seq(4)                      # (exchange, round trip) with seq 4, read from disk
    len(run)                           # how many round trips

**Seq and position.** A round trip's *seq* is the number the recorder gave it (``#4`` in
``looptap show``); its *position* is its place in the file. ``by_seq`` takes a seq, ``at`` a
position; ``run.pairs`` (each round trip with its exchange), ``run.exchanges`` and
``run.roundtrips`` are in position order (``run.pairs[k]`` is the k-th, read again).

**The format is told from the file's first bytes, once** (:mod:`cassettes.reading._formats`),
never from its name.

**How each is read.** A looptap cassette is read as a stream (the large-file reader,
:class:`~cassettes.reading._incremental.RunReader`, behind the same :class:`Run`): one pass
analyses it, keeping an index of byte offsets and the analysed turns on disk, and every later pass
reads the round trips again from disk one at a time. So ``show``, ``textconv`` and the exports hold
one round trip at a time, not the run: a million tiny records cost megabytes. ``whole=True`` reads
it into memory instead (the replay server and the pytest plugin, which need every exchange at hand)
and analyses it on first use. Imports (vcrpy, mitmproxy) are loaded whole; they are small by nature
and bounded by their loaders. ``follow=True`` follows a looptap cassette as it is written (the
inspector, the MCP server's ``tail``): :meth:`Run.step` reads what it gained, :meth:`Run.summaries`
and :meth:`Run.full_turn` give the turns read so far, :meth:`Run.finish` ends it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import CassetteFormatError
from ..hints import count
from ..parsing import RoundTrip
from ..storage import Problem, load_flows, load_vcr, read_records
from ..wire import Exchange
from . import _timeline
from ._branch import branch_origin, first_turn
from ._budget import memory_budget, within_budget
from ._conversation import RunConversation
from ._formats import FORMATS, detect, refused, unmasked
from ._memory_reader import Held
from ._reader import Reader, Records

if TYPE_CHECKING:  # the analysis is imported where a run is analysed: replay serves without it
    from ..analysis import Finding, RunAnalysis, Severity, Turn
    from ..shell import ShellRun
    from ..views import TurnSummary
    from ._incremental import Batch, RunReader

__all__ = ["Run", "open_run"]

T2 = TypeVar("T2")

#: How much of a file :meth:`Run.step` reads at a time, by default, and a run read as a stream
#: per step (bytes). A step's records are held parsed until the step is analysed: 4 MB steps were
#: the peak of a first ``show`` (the 100 MB run's 104 MB, against 92 MB with steps of 1 MB, at the
#: same CPU time).
STEP_BYTES = 1024 * 1024

_RANK = {"info": 0, "warning": 1, "error": 2}  # by Severity (a StrEnum: its members are these keys)


class Run:
    """A run: its raw exchanges, their parsed round trips, the layer analysis, and the assertion
    helpers a regression test uses (``cassettes.Run`` is this class).

    :func:`open_run` opens a file; :meth:`Run.of` takes exchanges held in memory (parsed and
    analysed on first use). ``pairs`` are the round trips with their exchanges (``roundtrips``
    and ``exchanges`` one side of them), ``len(run)`` their number, :meth:`by_seq` one of them by
    seq.

    Every run reads through one reader: a looptap cassette read as a stream or followed, through
    :class:`~cassettes.reading._incremental.RunReader` (its records through the one
    :class:`~cassettes.storage.RecordSource`); exchanges held in memory, through
    :class:`~._memory_reader.Held`. Both have the members below, so this class has one
    way of doing each.
    """

    def __init__(
        self,
        exchanges: Records[Exchange],
        analysis: RunAnalysis | None = None,
        *,
        name: str = "<run>",
        header: dict[str, Any] | None = None,
        problems: Sequence[str] = (),
        epoch: float | None = None,
        families: dict[str, int] | None = None,
        kind: str = "exchanges",
        skipped: dict[str, int] | None = None,
        reader: RunReader | None = None,
    ) -> None:
        #: What the run was read from (shown in exports; never used for identity).
        self.name = name
        #: The cassette header (``{}`` for inputs that have none, like vcrpy YAML).
        self.header: dict[str, Any] = header if header is not None else {}
        # What the run reads through: a looptap cassette's reader, or the exchanges held in memory.
        self._reader: Reader = (
            reader
            if reader is not None
            else Held(list(exchanges), analysis, problems, self._first_turn)
        )
        #: Epoch seconds to lay out round trips whose start time was not recorded (imports): the
        #: cassette's creation time, so an export of the same file is the same every time.
        self.epoch = epoch if epoch is not None else _timeline.epoch(self.header, self.exchanges)
        self._families = families
        #: The format it was read from: one of :data:`FORMATS`, or ``"exchanges"`` (in memory).
        self.kind = kind
        #: Flows a mitmproxy file held that are not HTTP (TCP, UDP, DNS), by type: not imported.
        self.skipped: dict[str, int] = skipped or {}
        self._shell: ShellRun | None = None
        #: The file a looptap cassette was read from (its traced processes are read there).
        self.path: Path | None = None

    @classmethod
    def of(
        cls,
        exchanges: list[Exchange],
        name: str = "<run>",
        header: dict[str, Any] | None = None,
        problems: list[str] | None = None,
        kind: str = "exchanges",
    ) -> Run:
        """A run of exchanges held in memory, numbered in order where they carry no seq."""
        for i, ex in enumerate(exchanges):
            if ex.seq is None:
                ex.seq = i
        return cls(exchanges, name=name, header=header, problems=problems or (), kind=kind)

    @classmethod
    def from_cassette(cls, path: str | Path) -> Run:
        """Deprecated spelling of ``open_run(path, whole=True)`` (docs/testing.md names it)."""
        return open_run(path, whole=True)

    def _first_turn(self) -> int:
        """The number of a conversation's first turn (a fork's branch keeps its origin's)."""
        return first_turn(branch_origin(self.header, None))

    def __len__(self) -> int:
        """How many round trips the run holds (so far, for a run being followed)."""
        return len(self.exchanges)

    @property
    def problems(self) -> list[str]:
        """Damage found while reading (never raised), one line each (:attr:`damage`: the same, by
        line and kind)."""
        return [str(p) for p in self._reader.problems]

    @property
    def damage(self) -> list[Problem]:
        """Damage found while reading a looptap cassette, by line and kind (``torn``, ``corrupt``
        …); empty for other inputs (their readers say what they skipped in :attr:`problems`)."""
        return self._reader.damage

    # -- a run followed as it grows (``open_run(path, follow=True)``; the inspector, the MCP tail)
    def step(self, max_bytes: int | None = STEP_BYTES) -> Batch:
        """Read and analyse what the file gained (up to about ``max_bytes``): the turns analysed,
        the damage found, and whether the end of what the file holds was reached. A run that is
        not followed is read already (``at_end``, nothing new)."""
        return self._reader.step(max_bytes)

    def finish(self) -> None:
        """The file is complete: report a torn tail and run the end-of-run checks (once)."""
        finished = self._reader.finish()
        if finished is None:  # (exchanges in memory: nothing was still to come)
            return
        self.header, first_started, self._families = finished
        created = _timeline.header_time(self.header)
        started = first_started if first_started is not None else 0.0
        self.epoch = created if created is not None else started

    def progress(self) -> float | None:
        """Share of the file read so far (``None``: unknown, or an empty file)."""
        return self._reader.progress()

    @property
    def records(self) -> int:
        """Round trips read so far (all of them for a run that is not followed)."""
        return self._reader.records

    @property
    def seqs(self) -> Sequence[int]:
        """The seqs of the round trips read so far, in recording order."""
        return self._reader.seqs

    @property
    def read_bytes(self) -> int:
        """How far into the file the reader got (bytes; 0 for a run not read from a looptap
        cassette)."""
        return self._reader.read_bytes

    @property
    def still_written(self) -> bool:
        """The file ends in a record not yet complete (a recording in progress, or a torn one)."""
        return self._reader.still_written

    @property
    def summaries(self) -> Mapping[int, TurnSummary]:
        """Every turn read so far, by seq, as a summary (what a turn list shows); the full turn:
        :meth:`full_turn`."""
        return self._reader.summaries

    def full_turn(self, seq: int, *, remember: bool = True) -> Turn:
        """Turn ``seq`` with everything the analysis gave it (``KeyError`` when there is none);
        ``remember=False`` for a pass over many turns (a search): not kept in the reader's cache."""
        return self._reader.full_turn(seq, remember=remember)

    def printed(self, make: Callable[[], Iterator[Any]], kind: str = "views") -> Iterator[Any]:
        """Each round trip's printed view (``show``'s, a JSON-able object per round trip, in
        order; ``kind="texts"``: the lines ``show`` printed after its title, unfiltered): those
        kept with the run's kept analysis when they check out, else ``make()``'s, kept for the
        next reader as they pass (docs/kept-analysis.md)."""
        return self._reader.printed(make, kind)

    def each_view(
        self,
        each: Callable[[Exchange, RoundTrip], T2],
        rest: Callable[[dict[str, Any]], T2] | None = None,
    ) -> Iterator[T2]:
        """``each(exchange, round trip)`` of every round trip, in recording order, for a printing
        pass (``each`` makes a round trip's printed view): a run continued from a kept analysis
        takes the views kept of what its file held before, where its analysis did not change them
        (docs/kept-analysis.md, "A file that grew"); given ``rest`` (``each`` but of a round
        trip's own part of its view, :func:`~._show_objects.own_view`), a run read with ``views``
        (:func:`open_run`) makes the view of one whose own part the analysis made as it parsed it
        by ``rest``, without reading the round trip again."""
        again = getattr(self._reader, "each_view", None)
        return again(each, rest) if again is not None else (each(ex, rt) for ex, rt in self.pairs)

    def close(self) -> None:
        """Let go of what the reader keeps on disk (the store of full turns)."""
        self._reader.close()

    def __bool__(self) -> bool:  # a run is a run, even an empty one
        return True

    # -- the round trips and the analysis (computed on first use for exchanges in memory)
    @property
    def pairs(self) -> Records[tuple[Exchange, RoundTrip]]:
        """Every round trip as ``(exchange, round trip)``: what crossed the wire and its parse,
        in recording order (``run.pairs[k]`` is the k-th; a run read from disk reads them again
        on each pass, one at a time)."""
        return self._reader.pairs

    @property
    def exchanges(self) -> Records[Exchange]:
        """The raw exchanges, in recording order (one side of :attr:`pairs`)."""
        return self._reader.exchanges

    @property
    def roundtrips(self) -> Records[RoundTrip]:
        """The parsed round trips, in recording order (the other side of :attr:`pairs`)."""
        return self._reader.roundtrips

    @property
    def analysis(self) -> RunAnalysis:
        """The layer analysis. A run followed and not finished (or not yet settled) has the
        conversations, errors and findings so far, and its ``turns`` stay empty
        (:attr:`summaries`, :meth:`full_turn`). A looptap cassette's traced shell commands
        (:attr:`shell`) add their findings once the run is read whole."""
        a = self._reader.analysis
        if self._shell is None and self.kind == "looptap" and a.turns:
            self._shell = shell = _shell_of(self)
            a.findings.extend(f for f in shell.findings if f not in a.findings)
        return a

    @property
    def shell(self) -> ShellRun:
        """The coding agent's shell commands ``looptap run`` traced, linked to the model's calls
        (cassettes.shell; empty for a run without them)."""
        if self._shell is None:
            _ = self.analysis
        if self._shell is None:
            self._shell = _shell_of(self)
        return self._shell

    @property
    def families(self) -> dict[str, int]:
        """Round trips by API family ("none" for traffic that is not an LLM API's)."""
        if self._families is None:
            self._families = {}
            for rt in self.roundtrips:
                self._families[rt.family] = self._families.get(rt.family, 0) + 1
        return self._families

    def by_seq(self, seq: int) -> tuple[Exchange, RoundTrip] | None:
        """The exchange and parsed round trip with this seq (not a position), if the run holds
        it."""
        return self._reader.find(seq)

    def at(self, pos: int) -> tuple[Exchange, RoundTrip]:
        """The exchange and parsed round trip at this position (the ``pos``-th in the file, from 0;
        negative counts from the end), not a seq: ``run.at(k)`` is ``run.pairs[k]``."""
        return self.pairs[pos]

    def exchange_by_seq(self, seq: int) -> Exchange:
        """The exchange with this seq; ``KeyError`` when the run holds none (what a diff reads of
        each paired turn)."""
        return self._reader.find_exchange(seq)

    # -- what happened -------------------------------------------------------------------------
    @property
    def turns(self) -> list[Turn]:
        """Every generation turn, in recording order."""
        turns = self.analysis.turns
        return [turns[s] for s in sorted(turns)]

    @property
    def conversations(self) -> list[RunConversation]:
        """Each conversation's turns (a list each), with its ``id``, ``parent_seq``, ``branch``
        and ``title``."""
        turns = self.analysis.turns
        return [
            RunConversation([turns[s] for s in c.turns], c.id, c.parent_seq, c.branch, c.title)
            for c in self.analysis.conversations
        ]

    def conversation(self, id: str) -> RunConversation:
        """The conversation ``id`` (``c1`` …); ``KeyError`` naming the ones there are."""
        for c in self.conversations:
            if c.id == id:
                return c
        raise KeyError(
            f"no conversation {id!r} in this run (there are: "
            f"{', '.join(c.id for c in self.conversations) or 'none'})"
        )

    @property
    def input_tokens(self) -> int:
        return sum(t.tokens.input or 0 for t in self.turns)

    @property
    def output_tokens(self) -> int:
        return sum(t.tokens.output or 0 for t in self.turns)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens over all turns (as reported, or estimated where not)."""
        return self.input_tokens + self.output_tokens

    @property
    def cost(self) -> Decimal | None:
        """Total cost in USD; ``None`` when no turn's price is known (never 0 for unknown).
        A partial sum when some turns are unpriced: see :attr:`cost_complete`."""
        known = [t.tokens.cost for t in self.turns if t.tokens.cost is not None]
        return sum(known, Decimal(0)) if known else None

    @property
    def cost_complete(self) -> bool:
        return all(t.tokens.cost is not None for t in self.turns)

    def findings(
        self, layer: str | None = None, min_severity: str | Severity = "warning"
    ) -> list[Finding]:
        """Findings (of one layer, ``E``/``A``/``C``), at or above ``min_severity``."""
        from ..analysis import Severity

        floor = _RANK[Severity(min_severity)]
        if layer is not None and layer not in ("E", "A", "C"):
            raise ValueError(f"layer must be 'E', 'A' or 'C', not {layer!r}")
        return [
            f
            for f in self.analysis.findings
            if (layer is None or f.layer == layer) and _RANK[f.severity] >= floor
        ]

    # -- assertions ----------------------------------------------------------------------------
    def assert_no_findings(
        self, layer: str | None = None, min_severity: str | Severity = "warning"
    ) -> None:
        """Fail (``AssertionError``) listing every finding of ``layer`` at or above
        ``min_severity``."""
        found = self.findings(layer, min_severity)
        if found:
            what = f"layer {layer}" if layer else "any layer"
            lines = [f"{len(found)} finding(s) in {what}:"]
            for f in found:
                where = (
                    f"conversation {f.conversation}, turn {f.turn}"
                    if f.conversation is not None
                    else f"seq {f.seq}"
                )
                cause = f.details.get("caused_by")
                lines.append(
                    f"  {f.layer} {f.severity.value} {f.code} "
                    f"({where}{', ' + f.path if f.path else ''}): {f.message}"
                    + (f" (caused by {cause})" if cause else "")
                )
            raise AssertionError("\n".join(lines))

    def assert_rules(self) -> None:
        """Fail (``AssertionError``) listing every call that broke one of the agent's rules
        (docs/rules.md: ``looptap-rules.toml`` in the working directory, or ``$LOOPTAP_RULES``);
        fail too when no rules file is in force, so the assertion is never vacuous."""
        from ..analysis import FILE, active, codes

        if active() is None:
            raise AssertionError(f"no agent rules in force: no {FILE} here and LOOPTAP_RULES unset")
        broken = [f for f in self.analysis.findings if f.code == codes.RULE_BROKEN]
        if broken:
            lines = [f"{count(len(broken), 'call')} broke the agent's rules:"]
            lines += [
                f"  conversation {f.conversation}, turn {f.turn}: {f.message}" for f in broken
            ]
            raise AssertionError("\n".join(lines))

    def __repr__(self) -> str:
        return (
            f"Run({count(len(self), 'round trip')}, {count(len(self.turns), 'turn')}, "
            f"{count(self.total_tokens, 'token')})"
        )


#: Called while a looptap cassette is read as a stream: (bytes read, file size, round trips read).
Progress = Callable[[int, int, int], None]


def open_run(
    path: str | Path,
    *,
    whole: bool = False,
    follow: bool = False,
    formats: Collection[str] = FORMATS,
    progress: Progress | None = None,
    cache: bool | None = None,
    views: bool = False,
) -> Run:
    """The run in the file at ``path``, in whichever of :data:`FORMATS` it is (told from its first
    bytes). A looptap cassette is read as a stream unless ``whole``; ``formats`` narrows what is
    accepted (``looptap import`` takes no looptap cassette). Raises
    :class:`~cassettes.errors.CassetteError` for a file that cannot be opened, is in none of the
    formats (naming what was tried), or is damaged beyond reading.

    ``follow``: a looptap cassette that may still be growing (a recording in progress), read as
    it is written: nothing is read yet; :meth:`Run.step` reads what the file gained, and
    :meth:`Run.finish` runs the end-of-run checks once it is complete (the inspector, the MCP
    server's ``tail``). :func:`~cassettes.reading._conversion.cassette_of` turns another format
    into a cassette to follow.

    ``progress``: called after each block a streamed read analyses, with the bytes read, the
    file's size and the round trips read (a command's progress line, ``views.progress``).

    ``cache``: a looptap cassette read as a stream takes the analysis a previous read of the same
    bytes kept, and keeps its own (docs/kept-analysis.md); ``False`` (or ``LOOPTAP_NO_CACHE=1``)
    analyses it afresh and keeps nothing. A followed one does so only with ``cache=True`` (a file
    that is not being written: the inspector of a finished run).

    ``views``: a looptap cassette read as a stream is to be printed (``show``, ``index``): its
    analysis keeps each round trip's own part of its printed view as it parses the round trip, so
    that the printing pass (:meth:`Run.each_view`) need not read every record again."""
    p = Path(path)
    if follow:
        return _follow(p, summaries=True, cache=bool(cache))
    cache = cache is not False
    kind = detect(p)
    if kind not in formats:
        raise refused(p, kind, formats)
    return _read(p, kind, whole, progress, cache, views)


def _read(
    p: Path,
    kind: str,
    whole: bool,
    progress: Progress | None = None,
    cache: bool = True,
    views: bool = False,
) -> Run:
    if kind == "looptap":
        return _read_whole(p) if whole else _stream(p, progress, cache, views)
    # Other tools' files hold what crossed the wire, keys included: they are redacted as they are
    # read, as `looptap import` redacts them, so no command (export --har, show, mcp) passes a
    # key on to a file or a terminal.
    from ..recording import Redactor

    redact = Redactor().exchange
    if kind == "mitmproxy":
        flows = load_flows(p)
        run = Run.of([redact(ex) for ex in flows.exchanges], p.name, kind=kind)
        run.skipped = dict(flows.skipped)
        return run
    run = Run.of([redact(unmasked(ex)) for ex in load_vcr(p)], p.name, kind=kind)
    if not run.epoch:  # no header, no recorded start: lay the run out at the file's time
        run.epoch = p.stat().st_mtime
    return run


def _read_whole(path: Path) -> Run:
    """A looptap cassette read into memory (:func:`~cassettes.storage.read_records`)."""
    cas = read_records(path)
    run = Run.of(
        cas.exchanges, path.name, cas.header, [str(p) for p in cas.problems], kind="looptap"
    )
    run.path = path
    return run


def _follow(p: Path, *, summaries: bool, cache: bool = False) -> Run:
    """A run over the reader of a looptap cassette, nothing read yet (see :func:`open_run`)."""
    from ._incremental import RunReader

    reader = RunReader(p, summaries=summaries, cache=cache)
    return Run((), name=p.name, kind="looptap", reader=reader, epoch=0.0)


def _stream(
    path: str | Path, progress: Progress | None = None, cache: bool = True, views: bool = False
) -> Run:
    """A looptap cassette analysed in one pass and read again, a round trip at a time, on each
    later pass. Raises :class:`~cassettes.errors.CassetteError` for a file that is not one, and
    :class:`~cassettes.reading._budget.RunTooLargeError` when the analysis outgrows
    :func:`~cassettes.reading._budget.memory_budget`."""
    from ._incremental import RunReader, take

    p = Path(path)
    reader = RunReader(p, summaries=False, views=views)
    run = Run((), name=p.name, kind="looptap", reader=reader, epoch=0.0)
    budget = memory_budget()
    # the analysis a reader of these same bytes kept (docs/kept-analysis.md)
    taken = cache and take(reader)
    at_end = taken
    while not at_end:
        at_end = run.step(STEP_BYTES).at_end
        if progress is not None:
            progress(reader.index.consumed, reader.index.size(), reader.records)
        convs = len(reader.analysis.conversations)
        within_budget(p, budget, "analysing", reader.index, reader.records, convs, run.close)
    try:
        run.finish()
    except CassetteFormatError as exc:  # nothing but an unfinished header line
        raise CassetteFormatError(str(exc)) from None
    reader.settle()  # complete: its analysis kept, its round trips read again on each pass
    return run


def _shell_of(run: Run) -> ShellRun:
    from ..shell import ShellRun, link_run, read_processes

    run._shell = ShellRun()  # (linking reads the analysis: it is not linked twice)
    if run.kind != "looptap":
        return run._shell
    index = getattr(run._reader, "index", None)  # (a streamed run's: where the tracer's lines are)
    path = run.path or getattr(index, "path", None)
    if path is None:
        return run._shell
    found = read_processes(path, index.shell if run.path is None and index is not None else None)
    # (a working tree taken without the tracer, where it cannot run, is linked too: a fork
    # rebuilds the tree from the scans placed at their requests)
    busy = found.processes or found.traced or found.start is not None or found.changes
    return link_run(run, found) if busy else ShellRun()
