"""Where looptap's first warning sits on multi-agent runs people labelled with the step that
failed them (issue 83, item 6): the Who&When benchmark (ICML 2025, "Which Agent Causes Task
Failures and When?"; MIT): 58 Magentic-One runs ("Hand-Crafted") and 126 CaptainAgent /
AutoGen group chats ("Algorithm-Generated"), each with ``mistake_agent`` and ``mistake_step`` (an
index into its ``history``).

    python bench/labelled_runs.py "DIR/Who&When"          # both folders of the benchmark
    python bench/labelled_runs.py "DIR/Who&When" --json    # one object per run

The benchmark is not shipped here (its files are the repository github.com/mingyin1/
Agents_Failure_Attribution's folder ``Who&When``). Each run is rebuilt as the round trips its
agents made, as a group chat sends them (AutoGen's shape, the one tests/cassettes/analysis/
test_labels_group_recorded.py records through looptap run): one round trip per turn an agent's
model answered (a speaker's consecutive steps: Magentic-One's orchestrator says its ledger, its
instruction and the next speaker in a row), its request that agent's system prompt (the run's
own where it has them), the task, and every earlier turn (the agent's own as the assistant's, the
others' as user messages with their ``name``). A turn no model answered (a code executor's
output, the human's task) is a message only. The labelled step's round trip is the one that
answered its turn, or for a message no model answered, the next one.

For each run it says the first finding at warning or error in the order every view shows them
(root causes first: :func:`cassettes.analysis.dispatch._roots.ordered_findings`), its code, and
where it sits against the labelled step (in round trips, its ``seq`` minus the labelled step's).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from looptap.cassettes.providers import Call, exchange  # noqa: E402
from looptap.cassettes.reading import open_run  # noqa: E402
from looptap.cassettes.recording.pipeline import CassetteWriter  # noqa: E402

#: Speakers whose messages no model answered: a code executor's output.
NOT_A_MODEL = {"ComputerTerminal", "Computer_terminal"}
#: The code looptap says a loop with (issue 83, item 6).
LOOP_REPORT = "C.loop_reported_not_stopped"


def _speaker(m: dict[str, Any]) -> str:
    """Who said message ``m``: Magentic-One's role (``Orchestrator (thought)`` is the
    Orchestrator's), else AutoGen's ``name``."""
    role = str(m.get("role") or "")
    if role.startswith("Orchestrator"):
        return "Orchestrator"
    return str(m.get("name") or role)


def _model(m: dict[str, Any], speaker: str) -> bool:
    """A model said this step: not a code executor's output, nor the human's task."""
    return speaker not in NOT_A_MODEL and m.get("role") != "human"


#: A browsing agent's step as Magentic-One's WebSurfer words the tool call it made (its first
#: line; the rest is what the call returned): the tool by its verb.
ACTION = re.compile(r"I (typed|clicked|scrolled|input|went|visited)\b[^\n]*")
TOOLS = {
    "typed": "input_text",
    "clicked": "click",
    "scrolled": "scroll",
    "input": "input_text",
    "went": "history_back",
    "visited": "visit_url",
}


def _action(text: str) -> tuple[str, str, str] | None:
    """(tool, its argument: the step's first line, what it returned) of a browsing step."""
    m = ACTION.match(text)
    if m is None:
        return None
    return TOOLS[m.group(1)], m.group(0), text[m.end() :].strip()


def _turn_messages(text: str, k: int, own: bool, speaker: str) -> list[dict[str, Any]]:
    """Turn ``k`` (its ``text``) as the messages of a request: the agent's own as its answer (a
    browsing step as its tool call and the call's result), another's as a named user message."""
    if not own:
        return [{"role": "user", "content": text, "name": _name(speaker)}]
    act = _action(text)
    if act is None:
        return [{"role": "assistant", "content": text}]
    tool, line, result = act
    call = {
        "id": f"call_{k}",
        "type": "function",
        "function": {"name": tool, "arguments": json.dumps({"step": line})},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{k}", "content": result},
    ]


def calls_of(run: dict[str, Any]) -> tuple[list[Call], list[int]]:
    """The round trips of one labelled run, and for each step of its history the index of the
    round trip it belongs to (the one that answered it, else the next; the last one after it).

    A turn is a speaker's consecutive steps (Magentic-One's orchestrator says its ledger, its
    instruction and the next speaker in a row, from one ledger call), one message in the history
    the next requests carry; a turn of a model is one round trip."""
    history = [m for m in run["history"] if isinstance(m, dict)]
    prompts = run.get("system_prompt") or {}
    question = str(run.get("question") or "")
    turns: list[tuple[str, bool, list[int]]] = []  # (speaker, a model's, the steps)
    for i, m in enumerate(history):
        me = _speaker(m)
        if turns and turns[-1][0] == me:
            turns[-1][2].append(i)
        else:
            turns.append((me, _model(m, me), [i]))
    texts = ["\n\n".join(str(history[i].get("content") or "") for i in t[2]) for t in turns]
    calls: list[Call] = []
    step_call: list[int | None] = [None] * len(history)
    for k, (me, model, steps) in enumerate(turns):
        if not model:
            continue
        system = prompts.get(me) if isinstance(prompts.get(me), str) else f"You are {me}."
        msgs: list[dict[str, Any]] = []
        if not (history and history[0].get("role") == "human"):
            msgs.append({"role": "user", "content": question})
        for j in range(k):
            msgs += _turn_messages(texts[j], j, turns[j][0] == me, turns[j][0])
        answer = _turn_messages(texts[k], k, True, me)[0]
        tools = [
            {"type": "function", "function": {"name": t, "parameters": {"type": "object"}}}
            for t in sorted(set(TOOLS.values()))
        ]
        calls.append(
            Call(
                "openai_chat", "a labelled run", msgs, answer, model="gpt-4o", system=[system],
                tools=tools if _action(texts[k]) is not None or "tool_calls" in str(msgs) else [],
            )
        )  # fmt: skip
        for i in steps:
            step_call[i] = len(calls) - 1
    # a step no model answered belongs to the next round trip (the one that read it first)
    out: list[int] = []
    nxt = len(calls) - 1
    for c in reversed(step_call):
        nxt = c if c is not None else nxt
        out.append(nxt)
    return calls, out[::-1]


def _name(speaker: str) -> str:
    """An OpenAI message ``name``: letters, digits, ``_`` and ``-``."""
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in speaker)[:64] or "user"


def measure(path: Path, tmp: Path) -> dict[str, Any] | None:
    """One run's figures, or ``None`` when it has no round trip or no labelled step."""
    run = json.loads(path.read_text())
    calls, step_call = calls_of(run)
    try:
        step = int(run.get("mistake_step"))
    except (TypeError, ValueError):
        return None
    if not calls or not 0 <= step < len(step_call):
        return None
    cassette = tmp / f"{path.parent.name}-{path.stem}.jsonl"
    with CassetteWriter(cassette, meta={"source": "bench/labelled_runs.py"}) as w:
        for n, call in enumerate(calls):
            w.append(exchange(call, n))
    findings = open_run(cassette, whole=True, cache=False).analysis.findings
    labelled = step_call[step]  # seq = the round trip's index (written in order from 0)
    grave = [f for f in findings if f.severity in ("warning", "error")]
    first = grave[0] if grave else None
    loop = [f for f in findings if f.code == LOOP_REPORT]
    return {
        "run": f"{path.parent.name}/{path.name}",
        "round_trips": len(calls),
        "labelled_seq": labelled,
        "mistake_agent": run.get("mistake_agent"),
        "first": None if first is None else first.code,
        "first_seq": None if first is None else first.seq,
        "first_after": None if first is None or first.seq is None else first.seq - labelled,
        "loop_report": [
            {"seq": f.seq, "severity": str(f.severity), "caused_by": f.details.get("caused_by")}
            for f in loop
        ],
        "pushed_down": sorted(  # warnings on earlier round trips that the first one went before
            {f.code for f in grave if first is not None and (f.seq or 0) < (first.seq or 0)}
        ),
    }


def runs(root: Path) -> Iterator[Path]:
    for sub in ("Hand-Crafted", "Algorithm-Generated"):
        yield from sorted((root / sub).glob("*.json"), key=lambda p: (len(p.stem), p.stem))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, help="the benchmark's folder (holding Hand-Crafted/ …)")
    ap.add_argument("--json", action="store_true", help="one object per run")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="looptap-labelled-") as tmp:
        for p in runs(args.root):
            row = measure(p, Path(tmp))
            if row is not None:
                rows.append(row)
                if args.json:
                    print(json.dumps(row))
    if args.json:
        return 0
    first_loop = [r for r in rows if r["first"] == LOOP_REPORT]
    late = [r for r in first_loop if r["first_after"] is not None and r["first_after"] > 1]
    fired = [r for r in rows if r["loop_report"]]
    print(f"{len(rows)} labelled runs; {LOOP_REPORT} found in {len(fired)}")
    print(f"first warning is {LOOP_REPORT}: {len(first_loop)} runs; of them more than one round "
          f"trip after the labelled step: {len(late)}; with an earlier warning it went before: "
          f"{sum(1 for r in first_loop if r['pushed_down'])}")  # fmt: skip
    print("first warning by code:")
    for code, n in Counter(r["first"] for r in rows).most_common():
        print(f"  {n:4d}  {code}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
