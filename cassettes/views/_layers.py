"""The layer analysis of a run as text (``looptap show``, textconv): each layer's counts, the
findings root cause first (:func:`analysis_lines`, :func:`finding_line`) and each conversation's
token-cost growth table (:class:`GrowthRows`, :func:`growth_row`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ..analysis import Conversation, Finding, Layer, RunAnalysis, Severity, Turn, kind_text, spill
from ..hints import count
from ._growth import growth_bars
from ._money import estimated_note, estimated_why, money

__all__ = [
    "SEVERITY_MARK",
    "SEVERITY_RANK",
    "GrowthRows",
    "analysis_lines",
    "caused_by_note",
    "finding_line",
    "growth_row",
    "layer_findings",
    "root_cause_lines",
]


def caused_by_note(f: Finding | dict[str, Any]) -> str:
    """`` (caused by CODE on #SEQ)`` for a consequence folded under its root cause, else ``""``."""
    d = (f.details if isinstance(f, Finding) else f.get("details")) or {}
    cause = d.get("caused_by")
    if not isinstance(cause, str) or not cause:
        return ""
    seq = d.get("caused_by_seq")
    return f" (caused by {cause}{f' on #{seq}' if isinstance(seq, int) else ''})"


#: The mark of each finding severity in text output (show, textconv).
SEVERITY_MARK = {"error": "✖", "warning": "▲", "info": "·"}
#: Each severity's rank (``None``: nothing found), by value (Severity is a StrEnum).
SEVERITY_RANK = {None: 0, "info": 1, "warning": 2, "error": 3}


def layer_findings(findings: Iterable[Finding]) -> dict[Layer, tuple[Severity | None, int]]:
    """Each layer's worst finding (``None``: the layer found nothing) and its number of findings:
    what every view's E/A/C badges say (the inspector's, the HTML page's)."""
    out: dict[Layer, tuple[Severity | None, int]] = {"E": (None, 0), "A": (None, 0), "C": (None, 0)}
    for f in findings:
        sev, n = out[f.layer]
        out[f.layer] = (
            f.severity if SEVERITY_RANK[f.severity] > SEVERITY_RANK[sev] else sev,
            n + 1,
        )
    return out


#: Each finding layer's heading in text output, in the order they are shown.
_LAYER_NAMES = {"E": "E — model emission", "A": "A — API", "C": "C — client dispatch"}


_SEVERITIES = ("error", "warning", "info")


def analysis_lines(analysis: RunAnalysis, rows: GrowthRows | None = None) -> Iterator[str]:
    """Each layer's counts, the findings root cause first (the analysis' own order: by severity,
    each consequence under its cause), then the token-cost growth table of each conversation, a
    line at a time (a run of a million conversations has millions of lines: they are never held).
    The table's rows are taken from ``rows`` where noted there (``show``: its printing pass had
    each turn at hand), else from ``analysis.turns`` (each turn read once)."""
    yield ""
    yield (
        f"{count(len(analysis.conversations), 'conversation')}, "
        f"{count(len(analysis.turns), 'turn')}, {count(len(analysis.findings), 'finding')}"
    )
    yield from _layer_counts(analysis.findings)
    if analysis.findings:
        yield ""
        yield "findings, root causes first:"
    for f in analysis.findings:
        yield finding_line(f, where=True)
    for conv in analysis.conversations:
        yield from _growth_lines(analysis, conv, rows)
    if analysis.errors:
        yield ""
        yield from (f"(!) analysis: {e}" for e in analysis.errors)


def _layer_counts(findings: Iterable[Finding]) -> list[str]:
    """Each layer's heading with its findings counted by severity."""
    counts = {(layer, sev): 0 for layer in _LAYER_NAMES for sev in _SEVERITIES}
    for f in findings:
        counts[f.layer, f.severity.value] += 1
    return [
        f"{name}: {count(counts[layer, 'error'], 'error')}, "
        f"{count(counts[layer, 'warning'], 'warning')}, {counts[layer, 'info']} info"
        for layer, name in _LAYER_NAMES.items()
    ]


def finding_line(f: Finding | dict[str, Any], *, where: bool = False) -> str:
    """A finding as text output writes it: ``✖ C C.code: message``; a consequence indented under
    its cause with ``↳`` and what caused it; ``where``: its round trip, conversation and turn
    after the code (the run's list). ``f``: a finding, or its JSON (``show --json``'s)."""
    if isinstance(f, Finding):
        sev, layer, code, message = f.severity.value, f.layer, f.code, f.message
        seq, conv, turn = f.seq, f.conversation, f.turn
    else:
        sev, layer, code, message = f["severity"], f["layer"], f["code"], f["message"]
        seq, conv, turn = f.get("seq"), f.get("conversation"), f.get("turn")
    under = "  ↳ " if caused_by_note(f) else ""
    at = (f" (#{seq} {conv}/turn {turn})" if conv is not None else f" (#{seq})") if where else ""
    return f"  {under}{SEVERITY_MARK[sev]} {layer} {code}{at}: {message}{caused_by_note(f)}"


def root_cause_lines(findings: list[Finding], width: int) -> list[str]:
    """The run's root cause at a glance: its first finding worse than info (the analysis' order
    puts root causes first), then what it caused, each line cut to ``width`` (``[]``: none)."""
    root = next((f for f in findings if f.severity.value != "info"), None)
    if root is None:
        return []

    def fit(line: str) -> str:
        return line if len(line) <= width else line[: width - 1] + "…"

    lines = [fit("root cause: " + finding_line(root, where=True).strip())]
    for f in findings:
        d = f.details or {}
        if f is not root and caused_by_note(f) and d.get("caused_by_seq") == root.seq:
            lines.append(fit("  " + finding_line(f, where=True).strip()))
    return lines


class GrowthRows:
    """Each turn's row of the token-growth table, noted by a pass that has the turn at hand
    (``show``'s printing pass, which restores each turn once) for :func:`analysis_lines`, which
    prints the tables after that pass: so no turn is restored from the reader's store again.

    A row is a line of text and why its cost is estimated (bits, 0: it is not). The most
    recently noted :data:`~cassettes.analysis.spill.KEEP` rows stay in memory, the others go to a
    temporary file (:class:`~cassettes.analysis.spill.SpillMap`): a run of a million turns holds
    no more than a run of ten thousand. :meth:`close` removes the file."""

    def __init__(self) -> None:
        self._spill = spill.Spill()
        self._rows: spill.SpillMap[int, tuple[str, int]] = spill.SpillMap(
            self._spill, keep=spill.KEEP
        )

    def note(self, turn: Turn) -> None:
        self.put(turn.seq, growth_row(turn))

    def put(self, seq: int, row: tuple[str, int] | list[Any]) -> None:
        """Note turn ``seq``'s row (:func:`growth_row`; a list when read back from a kept view)."""
        self._rows[seq] = (row[0], int(row[1]))
        self._rows.trim()

    def get(self, seq: int) -> tuple[str, int] | None:
        """The row noted for the turn ``seq`` (``None``: none was)."""
        try:
            return self._rows.peek(seq)
        except KeyError:
            return None

    def close(self) -> None:
        self._rows.clear()
        self._spill.close()


def growth_row(turn: Turn) -> tuple[str, int]:
    """A turn's row of the token-growth table, and why its own cost is estimated
    (:func:`~cassettes.views._money.estimated_why`, 0: it is not; :class:`GrowthRows`)."""
    return _growth_row(turn), estimated_why(turn.tokens)


def _growth_lines(
    analysis: RunAnalysis, conv: Conversation, rows: GrowthRows | None = None
) -> Iterator[str]:
    """A conversation's token-cost growth table (nothing for a conversation with no turn), a line
    at a time; each row from ``rows`` when noted there, else from its turn in ``analysis.turns``."""
    if not conv.turns:
        return
    branch = f", {kind_text(conv.kind, conv.parent_seq)}" if conv.parent_seq is not None else ""
    title = f" “{conv.label or conv.title}”" if conv.label or conv.title else ""
    yield ""
    yield (
        f"token growth, conversation {conv.id}{title} ({conv.family}, "
        f"{count(len(conv.turns), 'turn')}{branch})"
    )
    yield (
        f"  {'turn':>4} {'#':>4} {'input':>8} {'cached':>7} {'written':>7} {'output':>6} "
        f"{'reason':>6}  {'system':>6} {'tools':>6} {'history':>7} {'results':>7} {'new':>6}  "
        f"{'cost':>10} {'cumulative':>11}  source"
    )
    why = 0
    for s in conv.turns:
        row = rows.get(s) if rows is not None else None
        if row is None:
            t = analysis.turns[s]
            row = (_growth_row(t), estimated_why(t.tokens))
        yield row[0]
        why |= int(row[1])
    yield (
        "  (system + tools + history + results + new = input: estimated from text size, scaled to "
        "the reported input; docs/reading.md)"
    )
    if why:
        yield f"  ({estimated_note(why)})"


def _growth_row(t: Turn) -> str:
    """One turn's row of the growth table (``-``: a count the response did not report); the split
    is :func:`~cassettes.views._growth.growth_bars`', as every other view's."""

    k = t.tokens
    (bar,) = growth_bars([t])

    def n(v: int | None) -> str:
        return "-" if v is None else str(v)

    split = (
        f"{'':>6} {'':>6} {'':>7} {'':>7} {'':>6}"
        if bar.unsplit
        else f"{bar.system:>6} {bar.tools:>6} {bar.history:>7} {bar.tool_results:>7} {bar.new:>6}"
    )
    return (
        f"  {t.index:>4} {t.seq:>4} {n(k.input):>8} {n(k.cache_read):>7} {n(k.cache_write):>7} "
        f"{n(k.output):>6} {n(k.reasoning):>6}  {split}  {money(bar.cost, bar.cost_estimated):>10} "
        f"{money(bar.cumulative_cost, bar.cumulative_estimated):>11}  {k.source}"
    )
