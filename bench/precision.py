"""Findings precision on real traffic: every warning or error looptap raises over the shared corpus,
grouped by code, each group judged true or false by hand (the table below), the share of true ones.

    .venv/bin/python bench/precision.py            # prints the table
    .venv/bin/python bench/precision.py --write    # and writes docs/findings-precision.md

The corpus is ``tests/corpus`` (~1,100 vcrpy cassettes recorded by other projects against the real
APIs). A group found here that has no verdict yet is printed as UNJUDGED and counted as not true:
judge it (read the cassettes it lists) and add it to VERDICTS. Verdicts are keyed by code and, where
one code fires for different reasons, by a phrase of the message.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from _corpus import corpus_files, rel  # noqa: E402

from cassettes.analysis import analyse  # noqa: E402
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


def _verdict(code: str, message: str) -> tuple[bool, str] | None:
    for (c, phrase), v in VERDICTS.items():
        if c == code and phrase and phrase in message:
            return v
    return VERDICTS.get((code, ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="write docs/findings-precision.md")
    args = ap.parse_args()
    groups: dict[str, list[str]] = defaultdict(list)
    verdict_of: dict[str, tuple[bool, str] | None] = {}
    files = turns = 0
    for path in corpus_files():
        exchanges = load_vcr(path)
        for i, ex in enumerate(exchanges):
            ex.seq = i
        run = analyse(exchanges)
        files += 1
        turns += len(run.turns)
        for f in run.findings:
            if f.severity.value not in ("warning", "error"):
                continue
            v = _verdict(f.code, f.message)
            key = f.code if v is None or not any(p and p in f.message for (c, p) in VERDICTS if c == f.code) else f.code + " …"
            groups[key].append(f"{rel(path)}#{f.seq}")
            verdict_of[key] = v
    total = sum(len(v) for v in groups.values())
    true = sum(len(v) for k, v in groups.items() if (verdict_of[k] or (False, ""))[0])
    lines = [
        "# Findings precision on real traffic",
        "",
        "Generated by `python bench/precision.py --write`: every finding of severity warning or error that looptap",
        f"raises over the shared corpus ({files:,} cassettes recorded by other projects against the real APIs,",
        f"{turns:,} turns), grouped by code; each group judged from its findings' messages and the tests that recorded",
        "them (what each test provoked; verdicts and reasons are a table in the script). A group without a verdict counts as false.",
        "",
        f"**{true} of {total} true: {true / total:.1%}.**" if total else "**no warnings or errors**",
        "",
        "| code | count | verdict | why |",
        "|---|---|---|---|",
    ]
    for key in sorted(groups, key=lambda k: (-len(groups[k]), k)):
        v = verdict_of[key]
        verdict = "UNJUDGED" if v is None else ("true" if v[0] else "false")
        lines.append(f"| `{key}` | {len(groups[key])} | {verdict} | {v[1] if v else 'not judged yet: see ' + groups[key][0]} |")
    lines += [
        "",
        "What this does not measure: findings the corpus never provokes (its agents are test suites, not",
        "concurrent production agents), and recall (a bug missed is no finding). Recall is measured by",
        "`tests/cassettes/analysis/test_mutations.py` (client bugs injected into clean tool loops) and",
        "threading under concurrency by the scenario tests in `tests/cassettes/analysis/test_conversations.py`.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        (ROOT / "docs" / "findings-precision.md").write_text(text)
        print(f"wrote {ROOT / 'docs' / 'findings-precision.md'}")


if __name__ == "__main__":
    main()
