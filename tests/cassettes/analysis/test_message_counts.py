"""Counts that add up (issue 94 item 3): ``show`` said ``7 messages (1 as before, 2 new, 7
rewritten)`` (the 7 rewritten were the previous request's, not this one's), the inspector
"appended 5 messages" where 2 were new. Now the C layer counts a request's messages once each
(``Dispatch.counts``: as before + changed + new = sent; the previous request's dropped beside),
and ``show``, ``show --json`` and the inspector say those counts in the same words."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from real_corpus import CORPUS, cover_or_every, load, rel, walked

from looptap.cassettes.analysis import analyse
from looptap.cassettes.analysis.dispatch._managed import MAX_COMPARED
from tests.support.analysed import cli_run

pytestmark = pytest.mark.corpus

#: The turns the cover holds, at least (244 the last time it was counted).
COVER_TURNS = 200
#: Its managed turns (something changed or dropped): 3 the last time it was counted.
COVER_MANAGED = 3

#: A Responses API run whose third request was compacted: 3 of the previous request's messages
#: dropped, the compaction's summary in their place, 1 new input.
COMPACTED = (
    CORPUS / "pydantic-ai/tests/models/cassettes/test_openai_responses/"
    "test_openai_responses_compact_messages.yaml"
)


@cover_or_every("~3 s of CPU")
def test_the_parts_sum_to_the_whole_on_every_request_of_the_corpus(files: str) -> None:
    """Every turn of every corpus recording: as before + changed + new = the messages the
    request sent; none negative; the as-before part holds at least the kept prefix; what is
    dropped is at most what the previous request sent. By default the corpus' cover of wire
    shapes and finding codes (``findings_cover()``); the nightly run every file (over 1,000
    turns)."""
    turns = managed = 0
    for path in walked(files):
        try:
            exchanges = load(path)
        except Exception:  # (a file the loader refuses is another test's subject)
            continue
        run = analyse(exchanges)
        # what each request sent: the messages before this turn's own, and its own
        sent_by_seq = {s: t.c.appended_from + len(t.c.appended) for s, t in run.turns.items()}
        for seq, turn in run.turns.items():
            c, where = turn.c, f"{rel(path)} #{seq}"
            n = c.counts
            if n is None:
                assert sent_by_seq[seq] > MAX_COMPARED, where
                continue
            turns += 1
            managed += bool(n.changed or n.dropped)
            assert n.sent == sent_by_seq[seq], where
            assert n.as_before + n.changed + n.new == n.sent, (where, n)
            assert min(n.as_before, n.changed, n.new, n.dropped) >= 0, (where, n)
            assert n.as_before >= c.kept or c.link == "previous_response_id", (where, n)
            if turn.previous_seq is not None and c.link != "previous_response_id":
                assert n.dropped <= sent_by_seq.get(turn.previous_seq, 0), (where, n)
            if c.context is not None:
                assert n.dropped == len(c.context.dropped), (where, n)
    every = files == "every"
    assert turns > (1000 if every else COVER_TURNS), turns
    assert managed >= (5 if every else COVER_MANAGED), managed


def test_show_its_json_and_the_inspector_say_the_same_counts(tmp_path: Path) -> None:
    """On the compacted request: ``show``'s line, ``show --json``'s ``layers.C.counts`` and the
    inspector's C pane (its ``sent`` row) carry the same numbers, and they add up."""
    from looptap.cassettes.cli import main

    run = tmp_path / "run.jsonl"
    assert main(["import", "-q", str(COMPACTED), "-o", str(run)]) == 0
    shown = cli_run("show", str(run))  # (what show says: in process)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("request:")]
    said = "request: 2 messages (0 as before, 1 changed, 1 new; 3 of #1's dropped), 0 tools offered"
    assert said in lines, lines
    js = cli_run("show", "--json", str(run))
    assert js.returncode == 0, js.stderr
    objs = [orjson.loads(ln) for ln in js.stdout.splitlines() if ln.strip()]
    counts = [o["layers"]["C"]["counts"] for o in objs if o.get("layers")]
    assert {"sent": 2, "as_before": 0, "changed": 1, "new": 1, "dropped": 3} in counts, counts

    pytest.importorskip("textual")
    from looptap.cassettes.reading import open_run
    from looptap.inspector.widgets._dispatch import _dispatch_rows

    analysis = open_run(run, whole=True).analysis
    turn = next(t for t in analysis.turns.values() if t.c.counts and t.c.counts.dropped == 3)
    rows = dict(_dispatch_rows(turn))
    assert str(rows["sent"]) == "2 messages (0 as before, 1 changed, 1 new; 3 of #1's dropped)"
    assert not {"kept", "rewritten", "appended"} & set(rows), rows
