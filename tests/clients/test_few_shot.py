"""Issue 54: a prompt optimiser's few-shot prompts are independent prompts, one conversation each.

Recorded for real: DSPy 3 (``.venv-agents``) compiles ``Predict("question -> answer")`` with
``BootstrapFewShotWithRandomSearch`` (labeled and bootstrapped demos, two random candidates, each
evaluated on the train set) through ``looptap run`` against a scripted model that answers in DSPy's
fields, then asks the compiled program two questions. Every request is its own prompt: a system
prompt, demo question/answer pairs (which differ between candidates: a demo left out while it is
itself bootstrapped, a bootstrapped answer added, the demos shuffled) and a question. They were read
as rewrites of one history: ``C.history_mutated`` (warning) and ``C.history_trimmed``, three
prompts threaded onto others. Now: one conversation per request, no finding.

Twin: a DSPy program with a conversation history (``dspy.History``) re-sends its earlier questions
and answers and goes on: one conversation of three turns, as before.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.storage import read_records
from tests.clients.test_matrix import _SCRUB, AGENTS_PYTHON
from tests.support import progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder]

CAPITALS = {
    "France": "Paris",
    "Japan": "Tokyo",
    "Italy": "Rome",
    "Spain": "Madrid",
    "Germany": "Berlin",
    "Peru": "Lima",
    "Egypt": "Cairo",
    "Chile": "Santiago",
}

PRELUDE = """
import json, os
import dspy
dspy.configure(lm=dspy.LM("openai/gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"], cache=False))
def ask(country):
    return f"What is the capital of {country}?"
"""  # noqa: E501

OPTIMISER = """
train = [("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Spain", "Madrid"),
         ("Germany", "Berlin"), ("Peru", "Lima")]
trainset = [dspy.Example(question=ask(c), answer=a).with_inputs("question") for c, a in train]
metric = lambda ex, pred, trace=None: ex.answer.lower() == pred.answer.strip().lower()
optimiser = dspy.BootstrapFewShotWithRandomSearch(
    metric=metric, max_bootstrapped_demos=3, max_labeled_demos=3, max_rounds=1,
    num_candidate_programs=2, num_threads=1)
compiled = optimiser.compile(dspy.Predict("question -> answer"), trainset=trainset)
for c in ("Egypt", "Chile"):
    print(json.dumps({"final": compiled(question=ask(c)).answer}), flush=True)
"""

HISTORY = """
class QA(dspy.Signature):
    question: str = dspy.InputField()
    history: dspy.History = dspy.InputField()
    answer: str = dspy.OutputField()
predict, history = dspy.Predict(QA), dspy.History(messages=[])
for c in ("France", "Japan", "Peru"):
    answer = predict(question=ask(c), history=history).answer
    history.messages.append({"question": ask(c), "answer": answer})
    print(json.dumps({"final": answer}), flush=True)
"""


def _capital(req: ScriptedRequest) -> Reply:
    """The capital the request's last question asks for, in DSPy's fields."""
    m = re.search(r"capital of (\w+)", json.dumps(req.messages[-1]))
    answer = CAPITALS.get(m.group(1), "unknown") if m else "unknown"
    return Reply.say(f"[[ ## answer ## ]]\n{answer}\n\n[[ ## completed ## ]]", what=answer)


def _record(tmp_path: Path, program: str) -> Path:
    if not AGENTS_PYTHON.exists():
        pytest.skip(f"no agents environment at {AGENTS_PYTHON} (bash .ci/run makes it)")
    script = tmp_path / "client.py"
    script.write_text(PRELUDE + program)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k.upper() not in _SCRUB}
    env.update(
        HOME=str(home),
        PYTHONUNBUFFERED="1",
        OPENAI_API_KEY="sk-looptap-few-shot",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        DO_NOT_TRACK="1",
    )
    out = tmp_path / "run.jsonl"
    with ScriptedUpstream(_capital) as up:
        argv = [*RECORDER, "run", "-o", str(out), "--confdir", str(tmp_path / "conf")]
        argv += ["--upstream", f"openai={up.url}", "--", str(AGENTS_PYTHON), str(script)]
        proc = progress.run(
            argv, env=env, capture_output=True, text=True, cwd=tmp_path, stdin=subprocess.DEVNULL
        )
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-4000:])
    return out


def test_an_optimisers_few_shot_prompts_are_one_conversation_each(tmp_path: Path) -> None:
    """Was: C.history_mutated (warning) and C.history_trimmed, 34 conversations for 38 requests."""
    cas = read_records(_record(tmp_path, OPTIMISER))
    assert not cas.problems
    run = analyse(cas.exchanges)
    prompts = [ex.request_json()["messages"] for ex in cas.exchanges]
    # the optimiser's prompts as the recording has them: some share their demos and differ in
    # the last question, others share only their first demos
    assert len(prompts) >= 30 and len({len(p) for p in prompts}) >= 3
    assert [list(c.turns) for c in run.conversations] == [[ex.seq] for ex in cas.exchanges]
    assert [(f.code, f.seq) for f in run.findings] == []
    # each group of prompts that share their opening: its first main, the others its siblings
    kinds = [c.kind for c in run.conversations]
    assert {k for k, p in zip(kinds, prompts, strict=True) if len(p) == 2} == {"main"}
    assert set(kinds) == {"main", "sibling"}


def test_twin_a_dspy_conversation_history_stays_one_conversation(tmp_path: Path) -> None:
    cas = read_records(_record(tmp_path, HISTORY))
    run = analyse(cas.exchanges)
    assert [list(c.turns) for c in run.conversations] == [[0, 1, 2]]
    assert [(f.code, f.seq) for f in run.findings] == []
