"""Issue 70 item 6: DSPy 2.5's ``BootstrapFewShot`` read as ``C.history_mutated``.

Recorded for real through ``looptap run`` (dspy 2.5.43, litellm 1.53.7, openai 3.57.0, the program
below) against a scripted model that answers in DSPy's fields, wrong on its first answer for Japan,
Italy and Spain (the metric rejects those: no demo for them). The file is
``recorded/dspy-2.5.43-bootstrap.run.jsonl``; the environment is not one CI makes, so the test
reads the recording.

DSPy 2.5 re-sends a bootstrapped demo exactly as it was asked and answered: the compiled program's
first prompt (system, the demos France/Paris, Germany/Berlin, Peru/Lima, and Egypt) extends the
turn that asked about France, and the next two prompts are that prompt with another last question
(Chile, France). They were read as that conversation's history rewritten: two ``C.history_mutated``
warnings. DSPy 2.6 and 3 add no instruction to a demo, so their prompts never extend a turn (the
issue's runs with dspy 3.4.1 showed nothing; tests/clients/test_few_shot.py). Now: siblings.

Twin: the same recording with one demo's answer changed in the last prompts (Berlin → Bonn): the
history the prompt shares with the conversation's latest request differs, which is still
``C.history_mutated`` (once: the prompt after it is built like it).

The program, run by ``python client.py`` with ``OPENAI_BASE_URL`` on the recorder::

    dspy.configure(lm=dspy.LM("openai/gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"],
                              cache=False))
    train = [("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Spain", "Madrid"),
             ("Germany", "Berlin"), ("Peru", "Lima")]
    trainset = [dspy.Example(question=ask(c), answer=a).with_inputs("question") for c, a in train]
    metric = lambda ex, pred, trace=None: ex.answer.lower() == pred.answer.strip().lower()
    optimiser = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=4, max_labeled_demos=0)
    compiled = optimiser.compile(dspy.Predict("question -> answer"), trainset=trainset)
    for c in ("Egypt", "Chile", "France"):
        compiled(question=ask(c))
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson

from looptap.cassettes.analysis import analyse
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import Exchange

RECORDING = Path(__file__).parent / "recorded" / "dspy-2.5.43-bootstrap.run.jsonl"


def _exchanges() -> list[Exchange]:
    cas = read_records(RECORDING)
    assert not cas.problems
    return list(cas.exchanges)


def test_dspy25_compiled_prompts_are_siblings_not_a_rewritten_history() -> None:
    """Was: C.history_mutated (warning) on turns 7 and 8."""
    exchanges = _exchanges()
    prompts = [ex.request_json()["messages"] for ex in exchanges]
    # the recording as DSPy 2.5 sent it: six bootstrap questions, then three prompts of
    # system, three demos and a question; the first demo is turn 0's question and answer
    assert [len(p) for p in prompts] == [2] * 6 + [8] * 3
    assert prompts[6][1] == prompts[0][1] and prompts[6][2]["content"].startswith(
        "[[ ## answer ## ]]\nParis"
    )
    assert [p[:7] for p in prompts[7:]] == [prompts[6][:7]] * 2
    run = analyse(exchanges)
    assert [(f.code, f.seq) for f in run.findings] == []
    conversations = [(c.kind, list(c.turns)) for c in run.conversations]
    assert ("sibling", [7]) in conversations and ("sibling", [8]) in conversations


def test_twin_a_demo_changed_in_the_later_prompts_is_still_history_mutated() -> None:
    exchanges = _exchanges()
    for i in (7, 8):
        body = exchanges[i].request_json()
        assert "Berlin" in body["messages"][4]["content"]
        body["messages"][4]["content"] = body["messages"][4]["content"].replace("Berlin", "Bonn")
        exchanges[i] = dataclasses.replace(exchanges[i], request_body=orjson.dumps(body))
    run = analyse(exchanges)
    # once, where the history changed: turn 8 is then built like turn 7 but for its question
    assert [(f.code, f.seq) for f in run.findings] == [("C.history_mutated", 7)]
