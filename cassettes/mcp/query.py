"""Read-only questions about recorded runs, answered in bounded JSON: what ``looptap mcp`` serves
to a coding agent (and what any other program may call).

Every answer is a plain dict, at most about ``max_bytes`` of JSON (default :data:`DEFAULT_BYTES`):
lists are paged (``offset``/``limit``; ``next_offset`` says where the rest starts), long texts are
clipped with their full length and the call that reads them whole. The most useful part comes
first: root causes before their consequences, errors before warnings.

Recorded text is untrusted (a prompt injection may sit in any model output, tool result or error
body) and this time it goes into a *model*. So every recorded string is returned as data inside
the ``recorded`` part of an answer, never in the answer's own words, with terminal controls and
invisible characters made visible and secrets redacted once more; answers carry
:data:`UNTRUSTED_NOTE`. Files are only read under the roots given at start (after resolving
symlinks); anything else is refused with :class:`QueryError`.

The fence and the byte budget are :mod:`cassettes.mcp.answers`; the answer parts about recorded
things (findings, messages, a turn's layers) are :mod:`cassettes.mcp.recorded`; this module
finds and opens the runs and answers the questions.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from cassettes.analysis.dispatch import is_consequence
from cassettes.analysis.model import Turn
from cassettes.errors import CassetteError
from cassettes.fleet.files import RUN_SUFFIXES, run_files
from cassettes.hints import count
from cassettes.mcp.answers import (
    DEFAULT_BYTES,
    DEFAULT_CHARS,
    MAX_BYTES,
    MIN_BYTES,
    UNTRUSTED_NOTE,
    QueryError,
    byte_budget,
    cap_bytes,
    checked_roots,
    encode,
    json_size,
    layer_of,
    page,
    text,
    wrap,
)
from cassettes.mcp.recorded import conversation_row, finding_part, fit_turn, message_part, turn_body
from cassettes.models import Message
from cassettes.reading.run import Run, open_run

__all__ = [
    "DEFAULT_BYTES",
    "DEFAULT_CHARS",
    "MAX_BYTES",
    "MIN_BYTES",
    "UNTRUSTED_NOTE",
    "QueryError",
    "Runs",
    "cap_bytes",
    "encode",
    "page",
    "text",
]

_SEV = {"error": 0, "warning": 1, "info": 2}


# The names cassettes/mcp/forkquery.py reads from here.
_budget, _layer, _wrap = byte_budget, layer_of, wrap


@dataclass
class _Open:
    run: Run
    stamp: tuple[int, int]


#: Tolerated differences listed in a ``diff`` or ``fork_diff`` answer (the others counted).
TOLERATED_SHOWN = 20


def tolerated_count(turns: Sequence[dict[str, Any]]) -> int:
    """How many differences were tolerated (:mod:`cassettes.matching` entries,
    every turn)."""
    return sum(len(t.get("tolerated") or []) for t in turns)


def tolerated_lines(turns: Sequence[dict[str, Any]]) -> list[str]:
    """The first :data:`TOLERATED_SHOWN` tolerated differences, one line each as ``looptap diff``
    prints them (``tolerated at c1/turn 0 (seq 0): messages[0].content: recorded …, live … (by
    date)``), clipped: recorded text."""
    from cassettes.matching import report_lines

    return [text(line, 300) for line in report_lines(turns, "")[:TOLERATED_SHOWN]]


class Runs:
    """The runs under some root directories, opened on demand (the latest few kept open)."""

    def __init__(self, roots: Sequence[str | Path], keep: int = 4) -> None:
        self.roots = checked_roots(roots)
        self._open: OrderedDict[Path, _Open] = OrderedDict()
        # file → (Run followed as it grows, inode)
        self._live: OrderedDict[Path, tuple[Any, int]] = OrderedDict()
        self._keep = keep

    # -- files ------------------------------------------------------------------------------

    def resolve(self, name: str) -> Path:
        """A run's file from its name as listed (relative to a root) or an absolute path; refused
        unless it is a regular cassette file under a root once symlinks are resolved."""
        real = self.under_roots(
            name, "a run is named by its path as list_runs gives it (recorded.runs[].run)", "run"
        )
        if real is not None:
            if not real.is_file() or real.suffix.lower() not in RUN_SUFFIXES:
                raise QueryError(
                    "this run is not a cassette (.jsonl) or vcrpy (.yaml) file", run=name
                )
            return real
        for path in self.files():  # a name as list_runs shows it: unsafe characters made visible
            if text(self._label(path), 300) == name:
                return path
        raise QueryError("no run of this name under the roots (list_runs names them)", run=name)

    def under_roots(self, name: str, how: str, field: str) -> Path | None:
        """What ``name`` (absolute, or relative to a root) is once symlinks are resolved, or
        ``None`` when it exists under no root; a name that is no name is refused with ``how``, a
        path that resolves outside the roots as such (the error's ``field`` holding the name)."""
        if not isinstance(name, str) or not name or "\x00" in name or len(name) > 4096:
            raise QueryError(how)
        given = Path(name)
        for c in [given] if given.is_absolute() else [r / given for r in self.roots]:
            try:
                real = c.resolve(strict=True)
            except (OSError, RuntimeError):
                continue
            if not any(real.is_relative_to(r) for r in self.roots):
                raise QueryError(
                    "this is outside the directories this server may read", **{field: name}
                )
            return real
        return None

    def comparing(self, path_a: Path, a: Run, b: Run) -> Any:
        """How ``diff`` and ``fork_diff`` compare two runs' requests: as ``looptap diff`` does
        (:func:`cassettes.replay.forking.rundiff.comparing`: the built-in detectors, each run's with
        its own working directory and home, and the project's rules for A's cassette), the project's
        file read only when it is under a root (else no rules: this server reads nothing else)."""
        from cassettes.matching import RuleError, find_config
        from cassettes.replay.forking.rundiff import comparing, diff_rules

        found = find_config(path_a)  # (as diff_rules finds it)
        try:
            inside = found is not None and any(
                found[0].resolve().is_relative_to(r) for r in self.roots
            )
            rules = diff_rules(path_a) if inside else None
        except (RuleError, OSError) as exc:
            raise QueryError(
                "the project's looptap rules for this run cannot be used",
                run=self._label(path_a),
                reason=str(exc),
            ) from None
        return comparing(rules, a.header, b.header)

    def _label(self, path: Path) -> str:
        for r in self.roots:
            if path.is_relative_to(r):
                return (
                    str(path.relative_to(r))
                    if len(self.roots) == 1
                    else str(Path(r.name) / path.relative_to(r))
                )
        return str(path)

    def files(self) -> list[Path]:
        """Every cassette under the roots, newest first (symlinks leading out are left out)."""
        return run_files(self.roots)

    def open(self, name: str) -> tuple[Path, Run]:
        path = self.resolve(name)
        st = path.stat()
        stamp = (st.st_size, st.st_mtime_ns)
        hit = self._open.get(path)
        if hit is not None and hit.stamp == stamp:
            self._open.move_to_end(path)
            return path, hit.run
        try:
            run = open_run(path)
        except CassetteError as exc:  # its message may quote the file (a header's writer, a record)
            raise QueryError(
                "looptap cannot read this run", run=self._label(path), reason=str(exc)
            ) from None
        self._open[path] = _Open(run, stamp)
        while len(self._open) > self._keep:
            self._open.popitem(last=False)
        return path, run

    # -- answers ----------------------------------------------------------------------------

    def _overview(
        self, path: Path, run: Run, ends: Iterable[tuple[bool, Decimal | None, bool]] | None = None
    ) -> dict[str, Any]:
        """The run in a few figures. ``ends``: each conversation's last turn, whether found and
        its cumulative cost, when the caller has read them (else each is read here)."""
        a = run.analysis
        by: dict[str, dict[str, int]] = {}
        for f in a.findings:
            by.setdefault(f.layer, {}).setdefault(f.severity.value, 0)
            by[f.layer][f.severity.value] += 1
        cost = 0.0
        priced = True
        if ends is None:
            lasts = (a.turns.get(c.turns[-1]) if c.turns else None for c in a.conversations)
            ends = (
                (
                    t is not None,
                    t.tokens.cumulative_cost if t is not None else None,
                    t is not None and t.tokens.cumulative_estimated,
                )
                for t in lasts
            )
        estimated = False
        for found, cumulative, guessed in ends:
            if not found or cumulative is None:
                priced = priced and not found
                continue
            cost += float(cumulative)
            estimated = estimated or guessed
        return {
            "recorded_run": text(self._label(path), 300),
            "bytes": path.stat().st_size,
            "round_trips": len(run.exchanges),
            "conversations": len(a.conversations),
            "turns": len(a.turns),
            "findings": by,
            "cost_usd": round(cost, 6) if priced else None,
            "cost_estimated": estimated if priced else None,
            "problems": len(run.problems),
        }

    def list_runs(
        self, offset: int = 0, limit: int = 20, max_bytes: int = DEFAULT_BYTES
    ) -> dict[str, Any]:
        files = self.files()
        chosen = files[max(offset, 0) : max(offset, 0) + max(1, min(limit, 100))]
        rows: list[dict[str, Any]] = []
        from cassettes.fleet.index import overviews

        indexed = overviews(self.roots, chosen)  # the fleet index's, where it is up to date
        for p in chosen:
            hit = indexed.get(p)
            if hit is not None:
                rows.append(
                    {"recorded_run": text(self._label(p), 300), "bytes": p.stat().st_size, **hit}
                )
                continue
            try:
                rows.append(self._overview(*self.open(str(p))))
            except QueryError as exc:
                rows.append(
                    {
                        "recorded_run": text(self._label(p), 300),
                        "unreadable": str(exc),
                        "recorded_reason": exc.recorded.get("reason"),
                    }
                )
            except Exception as exc:  # one run a reader cannot cope with never hides the others
                rows.append(
                    {
                        "recorded_run": text(self._label(p), 300),
                        "unreadable": f"looptap failed on this run ({type(exc).__name__})",
                        "recorded_reason": text(str(exc), 300),
                    }
                )
        shown, _ = page(rows, 0, len(rows), byte_budget(max_bytes) - 300)
        after = max(offset, 0) + len(shown)
        return wrap(
            {
                "total": len(files),
                "next_offset": after if after < len(files) else None,
                "recorded": {"runs": shown},
            }
        )

    def summary(self, run: str, max_bytes: int = DEFAULT_BYTES) -> dict[str, Any]:
        path, r = self.open(run)
        a = r.analysis
        # (each turn is read once: the overview takes the last ones from the rows)
        ends: list[tuple[bool, Decimal | None, bool]] = []
        convs = [conversation_row(c, a, ends) for c in a.conversations]
        # The root causes are the answer: their messages get room (the top one whole up to 1,000
        # characters), and the conversations are paged into what is left, before any text is cut.
        found = [f for f in a.findings if not is_consequence(f)][:8]
        roots = [finding_part(f, 1000 if i == 0 else 400) for i, f in enumerate(found)]
        out = self._overview(path, r, ends)
        while len(roots) > 1 and json_size(out) + json_size(roots) > byte_budget(max_bytes) - 300:
            roots.pop()  # the least severe root causes go before the top one is cut
        budget = byte_budget(max_bytes) - json_size(out) - json_size(roots)
        shown, nxt = page(convs, 0, 200, budget) if budget > 200 else ([], 0 if convs else None)
        out.update(
            {
                "more_conversations": None
                if nxt is None
                else f"{len(convs) - nxt} more: call findings or growth with a conversation id",
                "root_causes": roots,
                "recorded": {
                    "families": {text(k, 40): v for k, v in r.families.items()},
                    "conversations": shown,
                    "problems": [text(p, 200) for p in r.problems[:5]],
                    "analysis_errors": [text(e, 200) for e in a.errors[:5]],
                },
            }
        )
        return wrap(out)

    def findings(
        self,
        run: str,
        layer: str | None = None,
        severity: str | None = None,
        code: str | None = None,
        conversation: str | None = None,
        offset: int = 0,
        limit: int = 30,
        max_bytes: int = DEFAULT_BYTES,
    ) -> dict[str, Any]:
        layer = layer_of(layer)
        least = (
            _SEV.get((severity or "info").lower()) if isinstance(severity or "info", str) else None
        )
        if least is None:
            raise QueryError(
                "severity is error, warning or info (the least severity shown)",
                severity=str(severity),
            )
        _, r = self.open(run)
        fs = [
            f
            for f in r.analysis.findings
            if (layer is None or f.layer == layer)
            and _SEV.get(f.severity.value, 3) <= least
            and (code is None or f.code == code)
            and (conversation is None or f.conversation == conversation)
        ]
        items = [finding_part(f, DEFAULT_CHARS) for f in fs]
        shown, nxt = page(items, offset, max(1, min(limit, 200)), byte_budget(max_bytes))
        return wrap({"total": len(items), "next_offset": nxt, "recorded": {"findings": shown}})

    def _turn(self, r: Run, seq: int | None, conversation: str | None, turn: int | None) -> Turn:
        a = r.analysis
        if seq is None:
            conv = next((c for c in a.conversations if c.id == conversation), None)
            head = a.turns.get(conv.turns[0]) if conv is not None and conv.turns else None
            # a fork's branch keeps its origin's numbers
            first = head.index if head is not None else 0
            if conv is None or turn is None or not first <= turn < first + len(conv.turns):
                raise QueryError(
                    "name a turn by seq, or by conversation and turn (as run_summary numbers them: "
                    "from 0, a branch from its origin's turn at the cursor)"
                )
            seq = conv.turns[turn - first]
        t = a.turns.get(seq)
        if t is None:
            if r.by_seq(seq) is None:
                seqs = [ex.seq for ex in r.exchanges if ex.seq is not None]
                span = f"#{min(seqs)} to #{max(seqs)}" if seqs else "none"
                raise QueryError(
                    f"seq {seq} is out of range: this run has "
                    f"{count(len(seqs), 'round trip')} ({span}); "
                    "run_summary lists its turns"
                )
            raise QueryError(
                f"round trip #{seq} is not an LLM turn (the run recorded "
                "it, but it is not an LLM API's traffic)"
            )
        return t

    def turn(
        self,
        run: str,
        seq: int | None = None,
        conversation: str | None = None,
        turn: int | None = None,
        message: int | None = None,
        chars: int = DEFAULT_CHARS,
        max_bytes: int = DEFAULT_BYTES,
    ) -> dict[str, Any]:
        """One turn with E/A/C; ``message`` reads one message of its request whole (paged by
        ``chars``)."""
        _, r = self.open(run)
        t = self._turn(r, seq, conversation, turn)
        found = r.by_seq(t.seq)
        msgs = found[1].request.messages if found and found[1].request is not None else []
        if message is not None:
            return _message_whole(t, msgs, message, chars, max_bytes)
        chars = max(40, min(chars, MAX_BYTES // 2))
        after = _next_seq(r, t)
        next_turn = r.analysis.turns.get(after) if after is not None else None
        return wrap(fit_turn(turn_body(t, msgs, after, next_turn, chars), max_bytes))

    def search(
        self, query: str, run: str | None = None, limit: int = 20, max_bytes: int = DEFAULT_BYTES
    ) -> dict[str, Any]:
        from cassettes.views.search import search_turns

        if not isinstance(query, str) or not query.strip():
            raise QueryError("search wants a non-empty query")
        from cassettes.fleet.index import runs_mentioning

        # the fleet index's runs that mention it first (any age), then the newest
        first = runs_mentioning(self.roots, query) if run is None else []
        names = [run] if run else list(dict.fromkeys(map(str, [*first, *self.files()[:50]])))
        hits: list[dict[str, Any]] = []
        for name in names:
            try:
                path, r = self.open(name)
            except QueryError:
                continue
            turns = (r.analysis.turns[s] for s in r.analysis.turns)
            for h in search_turns(turns, query, limit=limit):
                hits.append(
                    {
                        "run": self._label(path),
                        "seq": h.seq,
                        "conversation": h.conversation,
                        "turn": h.turn,
                        "where": h.where,
                        "snippet": text(h.snippet, 160),
                    }
                )
                if len(hits) >= limit:
                    break
            if len(hits) >= limit:
                break
        shown, nxt = page(hits, 0, limit, byte_budget(max_bytes))
        return wrap(
            {
                "hits": len(shown),
                "more": nxt is not None or len(hits) >= limit,
                "recorded": {"hits": shown},
            }
        )

    def growth(
        self,
        run: str,
        conversation: str,
        offset: int = 0,
        limit: int = 50,
        max_bytes: int = DEFAULT_BYTES,
    ) -> dict[str, Any]:
        _, r = self.open(run)
        conv = next((c for c in r.analysis.conversations if c.id == conversation), None)
        if conv is None:
            raise QueryError(
                "no conversation of this id in this run (run_summary lists them)",
                conversation=conversation,
            )
        from cassettes.views.growth import growth_bars, split_json
        from cassettes.views.money import money

        rows = []
        for s in conv.turns:
            t = r.analysis.turns.get(s)
            if t is None:
                continue
            k = t.tokens
            # the split every view shows (show, the inspector, HTML, OTel)
            (bar,) = growth_bars([t])
            rows.append(
                {
                    "turn": t.index,
                    "seq": s,
                    "input": k.input,
                    "cache_read": k.cache_read,
                    "cache_write": k.cache_write,
                    "output": k.output,
                    "split": split_json(bar),
                    "cost_usd": float(k.cost) if k.cost is not None else None,
                    "cost_estimated": k.price_estimated,
                    "cost": money(k.cost, k.price_estimated),
                    "cumulative_cost_usd": float(k.cumulative_cost)
                    if k.cumulative_cost is not None
                    else None,
                    "cumulative_estimated": k.cumulative_estimated,
                    "cumulative_cost": money(k.cumulative_cost, k.cumulative_estimated),
                    "source": k.source,
                }
            )
        shown, nxt = page(rows, offset, max(1, min(limit, 500)), byte_budget(max_bytes))
        return wrap(
            {"conversation": conv.id, "turns": len(rows), "next_offset": nxt, "growth": shown}
        )

    def diff(
        self,
        run_a: str,
        run_b: str,
        layer: str | None = None,
        limit: int = 20,
        max_bytes: int = DEFAULT_BYTES,
    ) -> dict[str, Any]:
        from cassettes.replay.forking.rundiff import diff_analysed

        layer = layer_of(layer)
        (apath, a), (_, b) = self.open(run_a), self.open(run_b)

        from cassettes.replay.comparison import different_apis

        unrelated = different_apis(a, b)  # the CLI's rule: runs on different APIs, one divergence
        divs = (
            [unrelated]
            if unrelated is not None
            else diff_analysed(
                a.analysis,
                b.analysis,
                a.exchange_by_seq,
                b.exchange_by_seq,
                compare=self.comparing(apath, a, b),
            )
        )
        items = [
            {
                "layer": d.layer,
                "conversation_a": d.conversation_a,
                "conversation_b": d.conversation_b,
                "turn": d.turn,
                "seq_a": d.seq_a,
                "seq_b": d.seq_b,
                "path": text(d.path, 200),
                "recorded_message": text(d.message, DEFAULT_CHARS),
                # what the CLI's diff shows under it: each run's value (ids as each run sent them)
                "recorded_changes": [text(line, 300) for line in d.change_lines(3)],
            }
            for d in divs
            if layer is None or d.layer == layer
        ]
        shown, nxt = page(items, 0, max(1, min(limit, 200)), byte_budget(max_bytes))
        tol = getattr(divs, "tolerated", [])
        return wrap(
            {
                "divergences": len(items),
                "same": not divs,
                "tolerated": tolerated_count(tol),
                "recorded": {"divergences": shown, "tolerated": tolerated_lines(tol)},
                "more": nxt is not None,
            }
        )

    def tail(
        self, run: str, after_seq: int = -1, limit: int = 20, max_bytes: int = DEFAULT_BYTES
    ) -> dict[str, Any]:
        """Round trips recorded after ``after_seq``. A recording in progress is followed as it
        grows: the server keeps reading the file where it stopped (only the new records are read
        and analysed), so call again with the ``last_seq`` of the previous answer."""
        from cassettes.reading.run import open_run

        path = self.resolve(run)
        st = path.stat()
        live = self._live.get(path)
        if live is None or live[1] != st.st_ino or st.st_size < live[0].read_bytes:
            try:
                live = (open_run(path, follow=True), st.st_ino)
            except CassetteError as exc:
                raise QueryError(
                    "looptap cannot read this run", run=self._label(path), reason=str(exc)
                ) from None
            self._live[path] = live
            while len(self._live) > self._keep:
                self._live.popitem(last=False)
        self._live.move_to_end(path)
        inc = live[0]
        try:
            while not inc.step().at_end:
                pass
        except CassetteError as exc:
            raise QueryError(
                "looptap cannot read this run", run=self._label(path), reason=str(exc)
            ) from None
        items: list[dict[str, Any]] = []
        seqs = inc.seqs
        for pos in range(len(seqs)):
            seq = seqs[pos]
            if seq <= after_seq:
                continue
            t = inc.summaries.get(seq)
            item: dict[str, Any] = {"seq": seq, "llm_turn": t is not None}
            if t is not None:
                item.update(
                    {
                        "conversation": t.conversation,
                        "turn": t.index,
                        "family": text(t.family, 40),
                        "status": t.status,
                        "finish": text(t.finish, 60),
                        "tool_calls": t.tool_calls,
                        "findings": [f"{f.severity.value} {f.layer} {f.code}" for f in t.findings],
                    }
                )
            items.append(item)
            if len(items) >= limit:
                break
        shown, _ = page(items, 0, max(1, min(limit, 500)), byte_budget(max_bytes) - 400)
        last = shown[-1]["seq"] if shown else after_seq
        return wrap(
            {
                "after_seq": after_seq,
                "last_seq": last,
                "round_trips_so_far": len(seqs),
                "still_being_written": inc.still_written,
                "findings_at_the_end": "findings of the run's end (e.g. a call never answered) "
                "appear once the recording is finished: see findings",
                "recorded": {"round_trips": shown},
            }
        )


def _message_whole(
    t: Turn, msgs: list[Message], message: int, chars: int, max_bytes: int
) -> dict[str, Any]:
    """Message ``message`` of turn ``t``'s request, whole up to ``chars`` characters a text; its
    texts shortened until it fits ``max_bytes``."""
    if not 0 <= message < len(msgs):
        raise QueryError(f"the request of #{t.seq} has {count(len(msgs), 'message')} (0-based)")
    budget = byte_budget(max_bytes)
    whole = max(1, min(chars, budget)) if chars else budget
    answer = wrap(
        {"seq": t.seq, "message": message, "recorded": message_part(msgs[message], whole)}
    )
    # texts shortened until the message fits
    while (size := json_size(answer)) > budget and whole > 40:
        whole = max(40, whole * budget // size * 9 // 10)
        answer["recorded"] = message_part(msgs[message], whole)
    return answer


def _next_seq(r: Run, t: Turn) -> int | None:
    """The seq of the turn after ``t`` in its conversation (``None``: the last)."""
    conv = next((c for c in r.analysis.conversations if c.id == t.conversation), None)
    if conv is None or t.seq not in conv.turns:
        return None
    i = conv.turns.index(t.seq)
    return conv.turns[i + 1] if i + 1 < len(conv.turns) else None
