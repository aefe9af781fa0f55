"""The counts of a managed request add up (issue 90, "must show"; docs/show-json.md
``layers.C.counts``) on every context recording and script the issue's tests read: as before +
changed + new = the messages the request sent; what the previous request sent and this one does
not carry is ``dropped``, beside, and where the history was managed exactly the messages the C
layer says dropped (``layers.C.context.dropped``). Read by ``show --json`` for the real
recordings (data/ctx: Strands 1.62.0, CrewAI 1.15.30, Google ADK 2.13.0, AutoGen 0.7.5, AG2
0.14.0, langgraph-supervisor 0.0.31, and the client matrix's 48 rewrites), and ``show``'s
request line says the same numbers."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from context_cases import all_cases
from scenarios import AgentScript
from test_context_mutations import TABLE, run_of
from test_context_overflow import FAMILIES, OVERFLOW, SUMMARISER, SUMMARY, _loop, _start
from test_context_rendered import _compacted_run

from looptap.cassettes.analysis import RunAnalysis, analyse
from looptap.cassettes.recording.pipeline import CassetteWriter
from tests.support.analysed import cli_output

DATA = Path(__file__).parent / "data" / "ctx"
RECORDINGS = sorted([*DATA.glob("*.jsonl"), *(DATA / "mutations").glob("*.jsonl")])


def _adds_up(run: RunAnalysis) -> int:
    """Every turn's counts add up; the number of managed turns (something dropped or changed)."""
    sent = {s: t.c.appended_from + len(t.c.appended) for s, t in run.turns.items()}
    managed = 0
    for seq, turn in run.turns.items():
        n, c = turn.c.counts, turn.c
        assert n is not None, seq
        assert n.sent == sent[seq], (seq, n)
        assert n.as_before + n.changed + n.new == n.sent, (seq, n)
        assert min(n.as_before, n.changed, n.new, n.dropped) >= 0, (seq, n)
        if turn.previous_seq is not None and c.link != "previous_response_id":
            assert n.dropped <= sent.get(turn.previous_seq, 0), (seq, n)
        if c.context is not None:
            managed += 1
            assert n.dropped == len(c.context.dropped), (seq, n, c.context.dropped)
            assert n.changed >= len(c.context.summary), (seq, n)
            # what the previous request sent: as before, cleared in place, or dropped
            if turn.previous_seq is not None and c.link != "previous_response_id":
                kept = n.as_before + n.changed - len(c.context.summary) + n.dropped
                assert kept == sent[turn.previous_seq], (seq, n, sent[turn.previous_seq])
    return managed


def _overflow(family: str, summary: bool) -> list[Any]:
    """test_context_overflow's runs: the 400, then the loop trimmed (or summarised) and sent
    again."""
    s = _loop(family)
    s.reply(error=OVERFLOW[family], echo=False)
    head, kept = s.history[: _start(s)], s.history[_start(s) :]
    if summary:
        side = AgentScript(family, tools=[], system=SUMMARISER)
        side.history[:] = [*head]
        side.user("Please summarize this conversation.")
        side.reply(SUMMARY)
        s.exchanges.append(side.exchanges[0])
        kept = [*AgentScript(family).user(SUMMARY).history, *kept]
    s.history[:] = kept
    s.reply("In Lyon it is rainy, 15 C.")
    for i, ex in enumerate(s.exchanges):
        ex.seq = i
    return s.exchanges


SCRIPTS: dict[str, Callable[[], Any]] = {
    **{f"case-{c.name}": (lambda c=c: c.script.exchanges) for c in all_cases()},
    **{
        f"mutation-{v}-{f}-{'trim' if t else 'alone'}": (
            lambda v=v, f=f, t=t: run_of(f, v, t)[0].exchanges
        )
        for v, f, t in TABLE
    },
    **{f"rendered-{f}": (lambda f=f: _compacted_run(f, True, False)) for f in ("openai_chat",)},
    **{
        f"overflow-{f}-{'summary' if m else 'trim'}": (lambda f=f, m=m: _overflow(f, m))
        for f in FAMILIES
        for m in (False, True)
    },
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_the_counts_of_every_scripted_context_case_add_up(name: str) -> None:
    _adds_up(analyse(SCRIPTS[name]()))


def test_the_scripts_manage_their_context() -> None:
    managed = sum(_adds_up(analyse(SCRIPTS[n]())) > 0 for n in SCRIPTS if n.startswith("case-"))
    assert managed >= 30, managed


_LINE = re.compile(rb"request: (\d+) messages?(?: \(([^)]*)\))?")
_PART = re.compile(rb"(\d+) (as before|changed|new)")


def _line_counts(m: re.Match[bytes]) -> tuple[int, int, int, int]:
    """``show``'s request line as (sent, as before, changed, new): a first request's line names
    no parts (every message new)."""
    sent = int(m.group(1))
    if m.group(2) is None:
        return sent, 0, 0, sent
    parts = {k.decode(): int(n) for n, k in _PART.findall(m.group(2))}
    return sent, parts.get("as before", 0), parts.get("changed", 0), parts.get("new", 0)


def _said_by_its_json(path: Path) -> list[tuple[int, int, int, int]]:
    """``show --json``'s counts of each request of ``path`` (they add up): (sent, as before,
    changed, new)."""
    rc, out, err = cli_output("show", "--json", "--no-cache", str(path))
    assert rc == 0, err
    views = [orjson.loads(ln) for ln in out.splitlines() if ln.startswith(b"{")]
    views = [v for v in views if v.get("layers")]
    assert views
    said, sent = [], {}
    for v in views:
        c = v["layers"]["C"]
        n = c["counts"]
        assert n["as_before"] + n["changed"] + n["new"] == n["sent"], (v["seq"], n)
        assert min(n.values()) >= 0, (v["seq"], n)
        if c.get("context"):
            assert n["dropped"] == len(c["context"]["dropped"]), (v["seq"], n, c["context"])
            prev = sent.get(v.get("previous_seq"))
            if prev is not None and c.get("link") != "previous_response_id":
                kept = n["as_before"] + n["changed"] - len(c["context"]["summary"]) + n["dropped"]
                assert kept == prev, (v["seq"], n, prev)
        sent[v["seq"]] = n["sent"]
        said.append((n["sent"], n["as_before"], n["changed"], n["new"]))
    return said


def _show_says(path: Path, said: list[tuple[int, int, int, int]]) -> None:
    """``show``'s request lines say the counts its JSON said."""
    rc, text, err = cli_output("show", "--no-cache", str(path))
    assert rc == 0, err
    lines = [_line_counts(m) for m in _LINE.finditer(text)]
    assert lines == said


def _rewrites_shown() -> set[Path]:
    """The client matrix's rewrites (a client's name, a dot, the rewrite) whose ``show`` text is
    compared by default: each client and each rewrite at least once (8 of the 48; every one at
    night). Its request line is one printer over the same counts (session 56)."""
    rewrites = [p for p in RECORDINGS if p.parent.name == "mutations"]
    clients = sorted({p.stem.split(".", 1)[0] for p in rewrites})
    kinds = sorted({p.stem.split(".", 1)[1] for p in rewrites})
    chosen = {f"{c}.{kinds[i % len(kinds)]}" for i, c in enumerate(clients)}
    shown = {p for p in rewrites if p.stem in chosen}
    assert len(shown) == len(clients) and {p.stem.split(".", 1)[1] for p in shown} == set(kinds)
    return shown


#: The recordings whose ``show`` text is compared by default: every framework's, and a cover of
#: the client matrix's rewrites.
SHOWN = {p for p in RECORDINGS if p.parent.name != "mutations"} | _rewrites_shown()


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_the_counts_of_every_recording_add_up_in_show_and_its_json(path: Path) -> None:
    said = _said_by_its_json(path)
    if path in SHOWN:
        _show_says(path, said)


@pytest.mark.slow(
    reason="show's text of the 40 other client-matrix rewrites, 1-4 s of CPU: the same printer "
    "over the same counts on a rewrite of each client and each kind by default "
    "(test_the_counts_of_every_recording_add_up_in_show_and_its_json)"
)
@pytest.mark.parametrize("path", [p for p in RECORDINGS if p not in SHOWN], ids=lambda p: p.stem)
def test_show_says_the_counts_of_every_other_rewrite(path: Path) -> None:
    _show_says(path, _said_by_its_json(path))


def test_a_script_written_as_a_cassette_says_the_same_in_show(tmp_path: Path) -> None:
    """A scripted summariser's run through ``show`` as the recordings are."""
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for ex in _compacted_run("openai_chat", True, False):
            w.append(ex)
    _show_says(path, _said_by_its_json(path))
