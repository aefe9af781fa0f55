"""Findings precision: every warning or error looptap raises, judged true or false, the share of true
ones, overall and on multi-turn conversations, on three bodies of traffic:

* **corpus**: ``tests/corpus`` (~1,100 vcrpy cassettes recorded by other projects against the real
  APIs); each group of findings judged by hand (VERDICTS below, keyed by code and, where one code
  fires for different reasons, by a phrase of the message). A group without a verdict is UNJUDGED
  and counts as false;
* **concurrency** (``--concurrency DIR``): the cassettes ``bench/concurrency.py --keep DIR`` kept.
  Ground truth is each request's private ``X-Bench-Agent``/``X-Bench-Turn`` header: a finding is true
  only on the buggy agent's bug turn with a code that names its bug;
* **matrix** (``--matrix DIR``): the cassettes the client matrix kept (tests/clients, with
  ``LOOPTAP_CLIENTS_REPORT=DIR``). A clean run's findings are all false; a bug run's finding is true
  only at the round trip the injector marked, in layer C, with a code that names the bug.

    .venv/bin/python bench/precision.py [--concurrency DIR] [--matrix DIR] [--json OUT]
    .venv/bin/python bench/precision.py ... --before BEFORE.json --write   # docs/findings-precision.md
    .venv/bin/python bench/precision.py --after AFTER.json --before BEFORE.json --write   # render saved runs

``--json`` saves every judged finding; run this script from another checkout (copy it there, keep
``LOOPTAP_CORPUS`` on the same corpus) to get the figures of that checkout's analysis on the same
recordings, and pass them with ``--before``: the page then shows both, side by side.
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from real_corpus import corpus_files, rel  # noqa: E402

from looptap.cassettes.analysis import analyse  # noqa: E402
from looptap.cassettes.storage import load_vcr  # noqa: E402

#: (code, phrase in the message or "") → (true?, why). Judged from every finding's message and the
#: test that recorded it (what the test provoked: a misspelt model, an edited history …), not by
#: replaying each.
VERDICTS: dict[tuple[str, str], tuple[bool, str]] = {
    ("A.http_error", ""): (
        True,
        "recorded API errors: unknown or misspelt models, unsupported parameters, media a model "
        "does not take, a refused tool-output order, token counts refused (an unknown model, a "
        "model or tool type that cannot be counted: no model call, on the round trip); each is "
        "the API's own status and text",
    ),
    ("A.truncated_length", ""): (
        True,
        "the finish reason is the token cap (length / max_tokens / MAX_TOKENS) and the cap in the "
        "request matches the output tokens",
    ),
    ("E.tool_call_error", ""): (
        True,
        "Gemini ended the turn with UNEXPECTED_TOOL_CALL: the "
        "model called list_files, which was not declared",
    ),
    ("A.rate_limited", ""): (
        True,
        "HTTP 429 from OpenRouter (three in a row, the test of retries)",
    ),
    ("A.error_in_200", ""): (
        True,
        "an error event inside a 200 stream (Groq tool_use_failed; OpenRouter's token limit)",
    ),
    ("C.truncated_treated_as_complete", ""): (
        True,
        "the client appended a cut-off answer (a token-capped "
        "one; one that ended in an error event) and went on",
    ),
    ("A.filtered", ""): (True, "Gemini stopped with SAFETY / Model Armor and returned nothing"),
    ("E.tool_not_offered", ""): (True, "the model called list_files; only get_file was offered"),
    ("E.tool_choice_violated", ""): (
        True,
        "Bedrock: tool choice required, the model answered in text",
    ),
    ("E.empty_response", ""): (True, "end_turn with reasoning only: no text, no call"),
    ("E.arguments_schema", ""): (
        True,
        "stock_lookup called with `ticker` where the schema "
        "requires `symbol` (the demo's model error)",
    ),
    ("C.pairing_error", ""): (
        True,
        "the API's 400: a reasoning item sent without its "
        "following item, after the test edited the history",
    ),
    ("C.history_mutated", "messages[0] differs from what was sent on turn 0"): (
        True,
        "the second request answers the first one's call id (one conversation since issue 82), "
        "but its first message asks to 'describe' the document where the first request asked "
        "to 'summarize' it: the test's prompt was edited between two recordings, so the history "
        "sent back is not what the model answered (test_text_plain_document_anthropic)",
    ),
    ("C.history_mutated", ""): (
        True,
        "the test rewrites an earlier message on purpose "
        "(test_openai_responses_thinking_with_modified_history)",
    ),
    ("C.assistant_not_echoed", ""): (
        True,
        "the same test drops part of the model's answer before sending it back",
    ),
    ("C.duplicate_tool_result", ""): (
        True,
        "two results carry one call id: ids the client made up for Gemini's id-less calls collide "
        "when the run is replayed to Anthropic",
    ),
    ("C.cache_prefix_broken", ""): (
        True,
        "the tool definitions changed after turn 0 and the reported cache reads dropped that turn",
    ),
    ("A.prompt_blocked", ""): (True, "Model Armor blocked the prompt before generation"),
    ("A.malformed_response", ""): (
        True,
        "HTTP 200 with a body that holds no choices, no finish, "
        "no error (the test of an invalid response)",
    ),
}

#: Codes that name each injected bug (tests/support/concurrency.py's and tests/clients' bugs).
CONCURRENCY_BUGS = {
    "dropped_result": {"C.dropped_tool_result", "C.missing_tool_result", "C.unanswered_tool_call"},
    "wrong_id": {"C.wrong_tool_call_id", "C.orphan_tool_result"},
    "no_echo": {"C.assistant_not_echoed"},
}
MATRIX_BUGS = {
    "drop_result": {"C.dropped_tool_result"},
    "wrong_id": {"C.wrong_tool_call_id", "C.orphan_tool_result"},
    "mutate_history": {"C.tool_result_altered", "C.history_mutated"},
}
BUG_TURN = 2  # tests/support/concurrency.py: the buggy agent's request that carries the bug

Record = dict[str, Any]


def _verdict(code: str, message: str) -> tuple[bool, str] | None:
    for (c, phrase), v in VERDICTS.items():
        if c == code and phrase and phrase in message:
            return v
    return VERDICTS.get((code, ""))


def _multi(run: Any) -> set[str]:
    return {c.id for c in run.conversations if len(c.turns) >= 2}


def _serious(run: Any) -> list[Any]:
    return [f for f in run.findings if f.severity.value in ("warning", "error")]


def corpus() -> tuple[list[Record], dict[str, int]]:
    out: list[Record] = []
    files = turns = multi_turns = 0
    for path in corpus_files():
        exchanges = load_vcr(path)
        for i, ex in enumerate(exchanges):
            ex.seq = i
        run = analyse(exchanges)
        files += 1
        turns += len(run.turns)
        multi = _multi(run)
        multi_turns += sum(len(c.turns) for c in run.conversations if c.id in multi)
        family = {seq: t.family for seq, t in run.turns.items()}
        for f in _serious(run):
            v = _verdict(f.code, f.message)
            out.append(
                {
                    "section": "corpus",
                    "where": f"{rel(path)}#{f.seq}",
                    "family": family.get(f.seq, "other"),
                    "code": f.code,
                    "message": f.message[:300],
                    "multi": f.conversation in multi,
                    "true": None if v is None else v[0],
                    "why": v[1] if v else "",
                }
            )
    return out, {"files": files, "turns": turns, "multi_turns": multi_turns}


def _show(path: Path) -> tuple[list[dict[str, Any]], set[str]]:
    """What ``looptap show --json`` of this checkout says of a cassette (the path a user sees:
    streamed, parked conversations and all): each round trip's view, and the conversations with two
    turns or more."""
    out = subprocess.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "show", "--json", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    views = [json.loads(ln) for ln in out.stdout.splitlines() if ln.startswith("{")]
    views = [v for v in views if v.get("schema") == "looptap.roundtrip/1"]
    turns = Counter(
        str(v.get("conversation"))
        for v in views
        if v.get("conversation") is not None and v.get("turn") is not None
    )
    return views, {c for c, n in turns.items() if n >= 2}


def _serious_views(views: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [
        (v, f)
        for v in views
        for f in v.get("findings") or []
        if f.get("severity") in ("warning", "error")
    ]


def _headers(record: dict[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in record.get("request", {}).get("headers", [])}


def _records(path: Path) -> dict[int, dict[str, Any]]:
    """The cassette's records by seq (the ground truth lives in their request headers and
    bodies)."""
    out: dict[int, dict[str, Any]] = {}
    for i, line in enumerate(path.read_text().splitlines()[1:]):
        rec = json.loads(line)
        derived = rec.get("derived") if isinstance(rec.get("derived"), dict) else {}
        out[int(derived.get("seq", i))] = rec
    return out


def concurrency(d: Path) -> tuple[list[Record], dict[str, int]]:
    out: list[Record] = []
    files = turns = 0
    for path in sorted(d.glob("*.jsonl")):
        m = re.fullmatch(r"(\w+)-(\d+)-(\w+)\.jsonl", path.name)
        if not m:
            continue
        family, n, variant = m.group(1), int(m.group(2)), m.group(3)
        views, multi = _show(path)
        truth = {seq: _headers(rec) for seq, rec in _records(path).items()}
        files += 1
        turns += sum(1 for v in views if v.get("turn") is not None)
        for v, f in _serious_views(views):
            h = truth.get(int(v["seq"]), {})
            agent, aturn = int(h.get("x-bench-agent", -1)), int(h.get("x-bench-turn", -1))
            on_bug = variant in CONCURRENCY_BUGS and agent == n // 2 and aturn == BUG_TURN
            code = str(f.get("code"))
            true = on_bug and code in CONCURRENCY_BUGS[variant]
            why = (
                f"names the injected {variant} on agent {agent}'s turn {aturn}"
                if true
                else f"on the bug turn, but {code} does not name {variant}"
                if on_bug
                else f"agent {agent} turn {aturn} is a correct turn"
            )
            out.append(
                {
                    "section": "concurrency",
                    "where": f"{family} N={n} {variant} #{v['seq']}",
                    "family": str(v.get("family")),
                    "code": code,
                    "message": str(f.get("message"))[:300],
                    "multi": str(v.get("conversation")) in multi,
                    "true": true,
                    "why": why,
                }
            )
    return out, {"files": files, "turns": turns, "multi_turns": turns}


#: Findings of the matrix's bug runs besides the root cause at the injected round trip, judged one
#: by one from the recordings: (client id or "*", code, where: "at" the injected round trip or
#: "after" it) → (true?, why).
MATRIX_JUDGED: dict[tuple[str, str, str], tuple[bool, str]] = {
    ("*", "C.history_mutated", "after"): (
        True,
        "mutate_history rewrites one request only: the next request re-sends the original text, so "
        "the history really changed again between the two (a consequence of the bug; folded under "
        "it since session 48 when the request restores the line the mutation changed)",
    ),
    ("*", "C.pairing_error", "at"): (
        True,
        "the scripted API's 400 for the mis-paired result really came; before issue 27 item 4 it "
        "kept its own severity beside the root cause",
    ),
    ("*", "E.repeated_call", "after"): (
        True,
        "the model called the same tool again after the result was lost",
    ),
    ("anthropic-python stream", "C.tool_results_split", "after"): (
        False,
        "after the rewritten history is restored, the result of turn 1's call (message [4], "
        "re-sent) is read as one of turn 2's results: results re-sent in a rewritten history are "
        "taken for new ones",
    ),
    ("pydantic-ai anthropic", "C.tool_results_split", "after"): (
        False,
        "after the rewritten history is restored, the result of turn 1's call (message [4], "
        "re-sent) is read as one of turn 2's results: results re-sent in a rewritten history are "
        "taken for new ones",
    ),
    ("google-genai stream", "C.orphan_tool_result", "at"): (
        False,
        "Gemini pairs results by name; in the rewritten history the re-sent functionResponses are "
        "read as new results, and find no call by that name left to answer",
    ),
    ("google-genai stream", "C.orphan_tool_result", "after"): (
        False,
        "Gemini pairs results by name; in the rewritten history the re-sent functionResponses are "
        "read as new results, and find no call by that name left to answer",
    ),
    # session 47: ctxc's history rewrites (test_matrix.py's test_history_mutation_is_named), false
    # at 21bc15ea and c86d115d alike, gone with s47-ctxr's analysis (docs/findings-precision.md)
    ("google-genai", "C.orphan_tool_result", "at"): (
        False,
        "mutate_reorder: Gemini pairs results by name; the reordered group's functionResponses are "
        "read as new results and find no call by that name left to answer",
    ),
    ("google-genai", "C.orphan_tool_result", "after"): (
        False,
        "mutate_drop_middle: the next request re-sends the dropped group; its functionResponses "
        "are read as new results and find no call by that name left to answer",
    ),
    ("anthropic-python", "C.tool_results_split", "after"): (
        False,
        "mutate_drop_middle: the next request re-sends the dropped group; its results are read as "
        "turn 2's, spread over two messages",
    ),
    ("vercel-ai anthropic", "C.tool_results_split", "after"): (
        False,
        "mutate_drop_middle: the next request re-sends the dropped group; its results are read as "
        "turn 2's, spread over two messages",
    ),
    ("smolagents", "C.dropped_tool_result", "at"): (
        False,
        "smolagents echoes calls and results as text; once the observation text is rewritten the "
        "echo no longer matches, the calls are not recognised as sent as text, and their results "
        "(sent as text) count as dropped",
    ),
    ("smolagents", "C.dropped_tool_result", "after"): (
        False,
        "smolagents echoes calls and results as text; once the observation text is rewritten the "
        "echo no longer matches, the calls are not recognised as sent as text, and their results "
        "(sent as text) count as dropped",
    ),
    ("smolagents", "C.assistant_not_echoed", "before"): (
        False,
        "smolagents echoes the model's tool calls as text (as "
        "in its clean run; fixed in issue 27's matrix work)",
    ),
    ("smolagents", "C.dropped_tool_result", "before"): (
        False,
        "smolagents sends calls and results as text; no call is pending for the API (as in its "
        "clean run; fixed: C.tool_calls_as_text, info)",
    ),
    ("llama-index react", "C.assistant_not_echoed", "before"): (
        False,
        "the ReAct text loop re-serialises the Action Input as a Python repr in its echo (as in "
        "its clean run; issue 27 item 7, fixed)",
    ),
    ("llama-index react", "C.assistant_not_echoed", "after"): (
        False,
        "the ReAct text loop re-serialises the Action Input as a Python repr in its echo (as in "
        "its clean run; issue 27 item 7, fixed)",
    ),
    ("openai-agents handoff", "C.dropped_tool_result", "at"): (
        False,
        "the handoff request whose result carried the wrong id was threaded as a new conversation "
        "(instructions and tools change at a handoff), so the bug was read as a dropped result at "
        "turn 0 (issue 27 item 8's class, fixed in b5025d6)",
    ),
    ("claude-code", "C.assistant_not_echoed", "after"): (
        False,
        "the result dropped from one request comes back on the next, before the previous answer: "
        "read as the answer not echoed (fixed by this branch: a late result is skipped before the "
        "echo)",
    ),
    ("codex", "E.tool_not_offered", "at"): (
        False,
        "Codex sends its tools as namespaces in an additional_tools item: the offered tools were "
        "read as the namespace names (issue 27 item 1, fixed)",
    ),
    ("codex", "E.tool_not_offered", "after"): (
        False,
        "Codex sends its tools as namespaces in an additional_tools item: the offered tools were "
        "read as the namespace names (issue 27 item 1, fixed)",
    ),
}

#: The clean runs' findings of the checkout before issue 27 (each false: a clean run has no bug),
#: why.
MATRIX_CLEAN_WHY: dict[tuple[str, str], str] = {
    (
        "codex",
        "E.tool_not_offered",
    ): "Codex's namespaced tools in additional_tools read "
    "as the namespace names (issue 27 item 1, fixed)",
    (
        "llama-index react",
        "C.assistant_not_echoed",
    ): "the ReAct text loop re-serialises the Action Input as "
    "a Python repr in its echo (issue 27 item 7, fixed)",
    (
        "smolagents",
        "C.assistant_not_echoed",
    ): "smolagents echoes the model's tool calls as text (fixed in issue 27's matrix work)",
    (
        "smolagents",
        "C.dropped_tool_result",
    ): "smolagents sends calls and results as text; no call is pending for the API (fixed: "
    "C.tool_calls_as_text, info)",
}


def _judge_matrix(client: str, code: str, where: str) -> tuple[bool, str] | None:
    return MATRIX_JUDGED.get((client, code, where)) or MATRIX_JUDGED.get(("*", code, where))


def matrix(d: Path) -> tuple[list[Record], dict[str, int]]:
    out: list[Record] = []
    files = turns = multi_turns = 0
    for path in sorted(d.glob("*.jsonl")):
        report = path.with_suffix(".json")
        if not report.exists():
            continue
        row = json.loads(report.read_text())
        views, multi = _show(path)
        files += 1
        turns += sum(1 for v in views if v.get("turn") is not None)
        multi_turns += sum(
            1 for v in views if v.get("turn") is not None and str(v.get("conversation")) in multi
        )
        marked = set()
        # the header, or the metadata of a WebSocket message
        for seq, rec in _records(path).items():
            if "x-matrix-injected" in json.dumps(rec.get("request")):
                marked.add(seq)
        bug = row.get("bug") if row.get("variant") == "bug" else None
        client = str(row["client"])
        for v, f in _serious_views(views):
            code, seq = str(f.get("code")), int(v["seq"])
            if (
                bug
                and seq in marked
                and f.get("layer") == "C"
                and code in MATRIX_BUGS.get(str(bug), set())
            ):
                true, why = True, f"names the injected {bug} where it was injected"
            elif bug:
                where = (
                    "at" if seq in marked else "before" if marked and seq < min(marked) else "after"
                )
                judged = _judge_matrix(client, code, where)
                true, why = (
                    judged
                    if judged
                    else (False, f"UNJUDGED: the run with {bug} injected at #{sorted(marked)}")
                )
            else:
                true, why = (
                    False,
                    "a clean run: " + MATRIX_CLEAN_WHY.get((client, code), "UNJUDGED"),
                )
            out.append(
                {
                    "section": "matrix",
                    "where": f"{client} ({row['variant']}) #{seq}",
                    "family": str(v.get("family")),
                    "code": code,
                    "message": str(f.get("message"))[:300],
                    "multi": str(v.get("conversation")) in multi,
                    "true": true,
                    "why": why,
                }
            )
    return out, {"files": files, "turns": turns, "multi_turns": multi_turns}


def _share(recs: list[Record], multi: bool = False) -> str:
    recs = [r for r in recs if r["multi"] or not multi]
    if not recs:
        return "no warnings or errors"
    true = sum(1 for r in recs if r["true"])
    return f"{true} of {len(recs)}: {true / len(recs):.1%}"


def _by_family(
    sec: str, a: list[Record], b: list[Record] | None, b_label: str, commit: str
) -> list[str]:
    """Precision by the API family of the round trip each finding is on (saved runs without the
    family, from before it was kept, show "–")."""
    fams = sorted({str(r.get("family", "–")) for r in a + (b or [])})
    if not fams:
        return []
    lines = [
        "",
        f"## {sec}: by API family",
        "",
        f"| family | {b_label}: all | before: multi-turn | after ({commit}): all | "
        "after: multi-turn |",
        "|---|---|---|---|---|",
    ]
    for fam in fams:
        fa = [r for r in a if str(r.get("family", "–")) == fam]
        fb = [r for r in b or [] if str(r.get("family", "–")) == fam]
        lines.append(
            f"| {fam} | "
            + (f"{_share(fb)} | {_share(fb, True)}" if b is not None else "not run | not run")
            + f" | {_share(fa)} | {_share(fa, True)} |"
        )
    return lines


def render(after: dict[str, Any], before: dict[str, Any] | None) -> str:
    b_label = f"before ({before['commit']})" if before else "before"
    lines = [
        "# Findings precision",
        "",
        "Generated by `python bench/precision.py --concurrency DIR --matrix DIR --before "
        "BEFORE.json --write` (the module's",
        "docstring says how each body of traffic is judged). Every finding of severity warning or "
        "error is judged true",
        "or false; precision is the share of true ones, over all findings and over those in "
        "multi-turn conversations",
        "(two turns or more). **Before** is the analysis of the checkout named, **after** this "
        "one, each run on the",
        "same recordings (the concurrency and matrix cassettes were recorded once, by this "
        "checkout's recorder).",
        "",
        f"| traffic | recordings | turns (in multi-turn conversations) | {b_label}: all | before: "
        f"multi-turn | after ({after['commit']}): all | after: multi-turn |",
        "|---|---|---|---|---|---|---|",
    ]
    for sec in ("corpus", "concurrency", "matrix"):
        if sec not in after["sections"]:
            continue
        a = after["sections"][sec]
        b = (before or {}).get("sections", {}).get(sec)
        st = a["stats"]
        lines.append(
            f"| {sec} | {st['files']:,} | {st['turns']:,} ({st['multi_turns']:,}) | "
            + (
                f"{_share(b['findings'])} | {_share(b['findings'], True)}"
                if b
                else "not run | not run"
            )
            + f" | {_share(a['findings'])} | {_share(a['findings'], True)} |"
        )
    for sec in ("corpus", "concurrency", "matrix"):
        if sec not in after["sections"]:
            continue
        a = after["sections"][sec]["findings"]
        b = ((before or {}).get("sections", {}).get(sec) or {}).get("findings")
        lines += _by_family(sec, a, b, b_label, after["commit"])
        lines += [
            "",
            f"## {sec}: findings by code",
            "",
            "| code | before | after | verdict | why |",
            "|---|---|---|---|---|",
        ]
        groups: dict[str, list[Record]] = defaultdict(list)
        for r in a:
            groups[r["code"]].append(r)
        bcount = Counter(r["code"] for r in b or [])
        for code in sorted(set(groups) | set(bcount), key=lambda c: (-len(groups.get(c, [])), c)):
            recs = groups.get(code) or [r for r in b or [] if r["code"] == code]
            verdicts = {r["true"] for r in recs}
            verdict = (
                "UNJUDGED"
                if None in verdicts
                else "true"
                if verdicts == {True}
                else "false"
                if verdicts == {False}
                else f"{sum(1 for r in recs if r['true'])} true, "
                f"{sum(1 for r in recs if not r['true'])} false"
            )
            why = (
                "; ".join(sorted({r["why"] for r in recs if r["true"]}))[:300]
                or "see the false ones below"
            )
            lines.append(
                f"| `{code}` | {bcount.get(code, 0) if b is not None else '–'} | "
                f"{len(groups.get(code, []))} | {verdict} | {why} |"
            )
        for label, recs in (("after", a), ("before", b or [])):
            false = [r for r in recs if not r["true"]]
            if not false:
                continue
            lines += ["", f"False or unjudged ones, {label} ({len(false)}):", ""]
            lines += [
                f"- `{r['code']}` at {r['where']}{' (multi-turn)' if r['multi'] else ''}: "
                f"{r['why'] or 'UNJUDGED'}. "
                f"{FALSE_WHY.get((sec, r['code'], r['where'].split(' #')[0]), '')}".rstrip()
                for r in false[:60]
            ]
            if len(false) > 60:
                lines.append(f"- … and {len(false) - 60} more of the same codes")
    lines += [
        "",
        "What this does not measure: findings none of these recordings provoke, and recall (a bug "
        "missed is no finding;",
        "the concurrency and matrix bug runs and `tests/cassettes/analysis/"
        "test_mutations.py` measure that).",
    ]
    return "\n".join(lines) + "\n"


#: Why each kind of false finding was false (root causes found by reading the recordings), by
#: section and code.
FALSE_WHY: dict[tuple[str, str, str], str] = {
    ("concurrency", "C.dropped_tool_result", "openai_responses N=64 no_echo"): (
        "Found by this run, not fixed (parsing, not analysis): with 64 agents the conversation's "
        "previous turn had its history released, so the request was parsed in full instead of "
        "against its base; the full parse groups the two consecutive function_call_output items "
        "into one message (3 messages), the delta parse keeps them apart (4), and the threader's "
        "kept count (3) then leaves no appended message: the result that is there is not seen. "
        "`looptap show` shows it; analyse() on the same cassette does not."
    ),
}


#: The line after which docs/findings-precision.md is written by hand (each fire of a new or
#: changed code, judged one by one): ``--write`` keeps it and what follows.
HAND = "<!-- written by hand below: bench/precision.py --write keeps it -->"


def _write(text: str) -> None:
    doc = ROOT / "docs" / "findings-precision.md"
    old = doc.read_text() if doc.exists() else ""
    kept = old[old.index(HAND) :] if HAND in old else ""
    doc.write_text(text + ("\n" + kept if kept else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--concurrency", type=Path, help="cassettes kept by bench/concurrency.py --keep"
    )
    ap.add_argument(
        "--matrix",
        type=Path,
        help="cassettes and reports kept by the client matrix (LOOPTAP_CLIENTS_REPORT)",
    )
    ap.add_argument("--json", type=Path, help="save every judged finding here")
    ap.add_argument(
        "--before", type=Path, help="the --json of another checkout, shown beside this one"
    )
    ap.add_argument(
        "--skip-corpus",
        action="store_true",
        help="leave the corpus out (to re-judge the other recordings)",
    )
    ap.add_argument("--after", type=Path, help="render this --json instead of analysing again")
    ap.add_argument("--write", action="store_true", help="write docs/findings-precision.md")
    args = ap.parse_args()
    if args.after is not None:
        text = render(
            json.loads(args.after.read_text()),
            json.loads(args.before.read_text()) if args.before else None,
        )
        print(text)
        if args.write:
            _write(text)
        return
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    result: dict[str, Any] = {"commit": commit or "?", "sections": {}}
    for name, fn, arg in (
        ("corpus", corpus, None),
        ("concurrency", concurrency, args.concurrency),
        ("matrix", matrix, args.matrix),
    ):
        if (name != "corpus" and arg is None) or (name == "corpus" and args.skip_corpus):
            continue
        recs, stats = fn(arg) if arg is not None else fn()  # type: ignore[operator]
        result["sections"][name] = {"findings": recs, "stats": stats}
        print(f"{name}: {stats}; all {_share(recs)}; multi-turn {_share(recs, True)}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    before = json.loads(args.before.read_text()) if args.before else None
    text = render(result, before)
    print(text)
    if args.write:
        _write(text)
        print(f"wrote {ROOT / 'docs' / 'findings-precision.md'}")


if __name__ == "__main__":
    main()
