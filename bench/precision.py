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

``--json`` saves every judged finding; run this script from another checkout (copy it there, keep
``LOOPTAP_CORPUS`` on the same corpus) to get the figures of that checkout's analysis on the same
recordings, and pass them with ``--before``: the page then shows both, side by side.
"""

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

from _corpus import corpus_files, rel  # noqa: E402

from cassettes.analysis import analyse  # noqa: E402
from cassettes.storage.store import read_cassette  # noqa: E402
from cassettes.storage.vcr import load_vcr  # noqa: E402

#: (code, phrase in the message or "") → (true?, why). Judged from every finding's message and the test that
#: recorded it (what the test provoked: a misspelt model, an edited history …), not by replaying each.
VERDICTS: dict[tuple[str, str], tuple[bool, str]] = {
    ("A.http_error", ""): (True, "recorded API errors: unknown or misspelt models, unsupported parameters, media a model does not take, a refused tool-output order; each is the API's own status and text"),
    ("A.truncated_length", ""): (True, "the finish reason is the token cap (length / max_tokens / MAX_TOKENS) and the cap in the request matches the output tokens"),
    ("E.tool_call_error", ""): (True, "Gemini ended the turn with UNEXPECTED_TOOL_CALL: the model called list_files, which was not declared"),
    ("A.rate_limited", ""): (True, "HTTP 429 from OpenRouter (three in a row, the test of retries)"),
    ("A.error_in_200", ""): (True, "an error event inside a 200 stream (Groq tool_use_failed; OpenRouter's token limit)"),
    ("C.truncated_treated_as_complete", ""): (True, "the client appended a cut-off answer (a token-capped one; one that ended in an error event) and went on"),
    ("A.filtered", ""): (True, "Gemini stopped with SAFETY / Model Armor and returned nothing"),
    ("E.tool_not_offered", ""): (True, "the model called list_files; only get_file was offered"),
    ("E.tool_choice_violated", ""): (True, "Bedrock: tool choice required, the model answered in text"),
    ("E.empty_response", ""): (True, "end_turn with reasoning only: no text, no call"),
    ("E.arguments_schema", ""): (True, "stock_lookup called with `ticker` where the schema requires `symbol` (the demo's model error)"),
    ("C.pairing_error", ""): (True, "the API's 400: a reasoning item sent without its following item, after the test edited the history"),
    ("C.history_mutated", ""): (True, "the test rewrites an earlier message on purpose (test_openai_responses_thinking_with_modified_history)"),
    ("C.assistant_not_echoed", ""): (True, "the same test drops part of the model's answer before sending it back"),
    ("C.duplicate_tool_result", ""): (True, "two results carry one call id: ids the client made up for Gemini's id-less calls collide when the run is replayed to Anthropic"),
    ("C.cache_prefix_broken", ""): (True, "the tool definitions changed after turn 0 and the reported cache reads dropped that turn"),
    ("A.prompt_blocked", ""): (True, "Model Armor blocked the prompt before generation"),
    ("A.malformed_response", ""): (True, "HTTP 200 with a body that holds no choices, no finish, no error (the test of an invalid response)"),
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
        for f in _serious(run):
            v = _verdict(f.code, f.message)
            out.append({"section": "corpus", "where": f"{rel(path)}#{f.seq}", "code": f.code, "message": f.message[:300],
                        "multi": f.conversation in multi, "true": None if v is None else v[0], "why": v[1] if v else ""})
    return out, {"files": files, "turns": turns, "multi_turns": multi_turns}


def _headers(ex: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in ex.request_headers}


def _load(path: Path) -> tuple[Any, Any]:
    cas = read_cassette(path)
    return cas, analyse(cas.exchanges, cas.roundtrips())


def concurrency(d: Path) -> tuple[list[Record], dict[str, int]]:
    out: list[Record] = []
    files = turns = 0
    for path in sorted(d.glob("*.jsonl")):
        m = re.fullmatch(r"(\w+)-(\d+)-(\w+)\.jsonl", path.name)
        if not m:
            continue
        family, n, variant = m.group(1), int(m.group(2)), m.group(3)
        cas, run = _load(path)
        files += 1
        turns += len(run.turns)
        truth = {ex.seq: _headers(ex) for ex in cas.exchanges}
        multi = _multi(run)
        for f in _serious(run):
            h = truth.get(f.seq, {})
            agent, aturn = int(h.get("x-bench-agent", -1)), int(h.get("x-bench-turn", -1))
            on_bug = variant in CONCURRENCY_BUGS and agent == n // 2 and aturn == BUG_TURN
            true = on_bug and f.code in CONCURRENCY_BUGS[variant]
            why = (f"names the injected {variant} on agent {agent}'s turn {aturn}" if true else
                   f"on the bug turn, but {f.code} does not name {variant}" if on_bug else
                   f"agent {agent} turn {aturn} is a correct turn")
            out.append({"section": "concurrency", "where": f"{family} N={n} {variant} #{f.seq}", "code": f.code,
                        "message": f.message[:300], "multi": f.conversation in multi, "true": true, "why": why})
    return out, {"files": files, "turns": turns, "multi_turns": turns}


def matrix(d: Path) -> tuple[list[Record], dict[str, int]]:
    out: list[Record] = []
    files = turns = multi_turns = 0
    for path in sorted(d.glob("*.jsonl")):
        report = path.with_suffix(".json")
        if not report.exists():
            continue
        row = json.loads(report.read_text())
        cas, run = _load(path)
        files += 1
        turns += len(run.turns)
        multi = _multi(run)
        multi_turns += sum(len(c.turns) for c in run.conversations if c.id in multi)
        marked = {ex.seq for ex in cas.exchanges if "x-matrix-injected" in _headers(ex)}
        bug = row.get("bug") if row.get("variant") == "bug" else None
        for f in _serious(run):
            true = bool(bug) and f.seq in marked and f.layer == "C" and f.code in MATRIX_BUGS.get(str(bug), set())
            why = (f"names the injected {bug} where it was injected" if true else
                   f"the run with {bug} injected at #{sorted(marked)}: not its root cause" if bug else "a clean run")
            out.append({"section": "matrix", "where": f"{row['client']} ({row['variant']}) #{f.seq}", "code": f.code,
                        "message": f.message[:300], "multi": f.conversation in multi, "true": true, "why": why})
    return out, {"files": files, "turns": turns, "multi_turns": multi_turns}


def _share(recs: list[Record], multi: bool = False) -> str:
    recs = [r for r in recs if r["multi"] or not multi]
    if not recs:
        return "no warnings or errors"
    true = sum(1 for r in recs if r["true"])
    return f"{true} of {len(recs)}: {true / len(recs):.1%}"


def render(after: dict[str, Any], before: dict[str, Any] | None) -> str:
    b_label = f"before ({before['commit']})" if before else "before"
    lines = [
        "# Findings precision",
        "",
        "Generated by `python bench/precision.py --concurrency DIR --matrix DIR --before BEFORE.json --write` (the module's",
        "docstring says how each body of traffic is judged). Every finding of severity warning or error is judged true",
        "or false; precision is the share of true ones, over all findings and over those in multi-turn conversations",
        "(two turns or more). **Before** is the analysis of the checkout named, **after** this one, each run on the",
        "same recordings (the concurrency and matrix cassettes were recorded once, by this checkout's recorder).",
        "",
        f"| traffic | recordings | turns (in multi-turn conversations) | {b_label}: all | before: multi-turn | after ({after['commit']}): all | after: multi-turn |",
        "|---|---|---|---|---|---|---|",
    ]
    for sec in ("corpus", "concurrency", "matrix"):
        if sec not in after["sections"]:
            continue
        a = after["sections"][sec]
        b = (before or {}).get("sections", {}).get(sec)
        st = a["stats"]
        lines.append(f"| {sec} | {st['files']:,} | {st['turns']:,} ({st['multi_turns']:,}) | "
                     + (f"{_share(b['findings'])} | {_share(b['findings'], True)}" if b else "not run | not run")
                     + f" | {_share(a['findings'])} | {_share(a['findings'], True)} |")
    for sec in ("corpus", "concurrency", "matrix"):
        if sec not in after["sections"]:
            continue
        a = after["sections"][sec]["findings"]
        b = ((before or {}).get("sections", {}).get(sec) or {}).get("findings")
        lines += ["", f"## {sec}: findings by code", "", "| code | before | after | verdict | why |", "|---|---|---|---|---|"]
        groups: dict[str, list[Record]] = defaultdict(list)
        for r in a:
            groups[r["code"]].append(r)
        bcount = Counter(r["code"] for r in b or [])
        for code in sorted(set(groups) | set(bcount), key=lambda c: (-len(groups.get(c, [])), c)):
            recs = groups.get(code) or [r for r in b or [] if r["code"] == code]
            verdicts = {r["true"] for r in recs}
            verdict = ("UNJUDGED" if None in verdicts else "true" if verdicts == {True} else "false" if verdicts == {False} else
                       f"{sum(1 for r in recs if r['true'])} true, {sum(1 for r in recs if not r['true'])} false")
            why = "; ".join(sorted({r["why"] for r in recs if r["true"]}))[:300] or "see the false ones below"
            lines.append(f"| `{code}` | {bcount.get(code, 0) if b is not None else '–'} | {len(groups.get(code, []))} | {verdict} | {why} |")
        for label, recs in (("after", a), ("before", b or [])):
            false = [r for r in recs if not r["true"]]
            if not false:
                continue
            lines += ["", f"False or unjudged ones, {label} ({len(false)}):", ""]
            lines += [f"- `{r['code']}` at {r['where']}{' (multi-turn)' if r['multi'] else ''}: {r['why'] or 'UNJUDGED'}. "
                      f"{FALSE_WHY.get((sec, r['code']), '')}".rstrip() for r in false[:60]]
            if len(false) > 60:
                lines.append(f"- … and {len(false) - 60} more of the same codes")
    lines += [
        "",
        "What this does not measure: findings none of these recordings provoke, and recall (a bug missed is no finding;",
        "the concurrency and matrix bug runs and `tests/cassettes/analysis/test_mutations.py` measure that).",
    ]
    return "\n".join(lines) + "\n"


#: Why each kind of false finding was false (root causes found by reading the recordings), by section and code.
FALSE_WHY: dict[tuple[str, str], str] = {
    ("matrix", "C.assistant_not_echoed"): (
        "Claude Code's drop_result run: the relay dropped the result from one request only; the agent kept it and sent it "
        "on its next turn, inserted before the answer of the turn that lacked it. The history did change, but the "
        "message blames the echo of the model's answer, and it is not folded under the dropped result that explains "
        "it (a one-request injection; a client that really loses a result keeps losing it)."),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", type=Path, help="cassettes kept by bench/concurrency.py --keep")
    ap.add_argument("--matrix", type=Path, help="cassettes and reports kept by the client matrix (LOOPTAP_CLIENTS_REPORT)")
    ap.add_argument("--json", type=Path, help="save every judged finding here")
    ap.add_argument("--before", type=Path, help="the --json of another checkout, shown beside this one")
    ap.add_argument("--write", action="store_true", help="write docs/findings-precision.md")
    args = ap.parse_args()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result: dict[str, Any] = {"commit": commit or "?", "sections": {}}
    for name, fn, arg in (("corpus", corpus, None), ("concurrency", concurrency, args.concurrency), ("matrix", matrix, args.matrix)):
        if name != "corpus" and arg is None:
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
        (ROOT / "docs" / "findings-precision.md").write_text(text)
        print(f"wrote {ROOT / 'docs' / 'findings-precision.md'}")


if __name__ == "__main__":
    main()
