"""Issue 70 item 6: a Gemini stream sent back exactly as it was streamed is the answer echoed.

Recorded for real: google-genai (the suite's environment) streams each answer with
``generate_content_stream`` and keeps the history by hand, as its own docs and the client matrix
do: every chunk's parts appended to one ``model`` content. The scripted model streams its text in
pieces of 7 characters, cut mid-word, so the history holds the answer as ten text parts. It was
read as ``C.assistant_not_echoed`` (the parts' texts joined with a space did not equal the whole
text): now adjacent text parts are one text, however they are split.

Twin: the same client dropping one chunk's part before sending the history back still fires.
"""

from __future__ import annotations

import sys

import pytest

from looptap.cassettes.analysis import Finding
from looptap.cassettes.reading import open_run
from tests.support import progress
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = needs_recorder

CLIENT = r"""
import os, sys
from google import genai
from google.genai import types

client = genai.Client(api_key=os.environ["GEMINI_API_KEY"])
for mode in sys.argv[1:]:  # one conversation a mode
    contents = [types.Content(role="user", parts=[types.Part(text=f"Greet me ({mode}).")])]
    for turn in range(2):
        parts = []
        for chunk in client.models.generate_content_stream(model="gemini-2.5-flash", contents=contents):
            if chunk.candidates and chunk.candidates[0].content and chunk.candidates[0].content.parts:
                parts += chunk.candidates[0].content.parts
        print(len(parts), "".join(p.text or "" for p in parts), flush=True)
        if mode == "drop":  # the bug: one chunk's part lost on the way back
            parts = parts[:3] + parts[4:]
        contents.append(types.Content(role="model", parts=parts))
        contents.append(types.Content(role="user", parts=[types.Part(text="Again, please.")]))
"""  # noqa: E501
ANSWER = "Hello there, friend! Hello again, my good friend, how are you today?"


MODES = ("as-streamed", "drop")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Finding]]:
    """One ``looptap run`` of the client, a conversation a mode (recorded once, read by both
    tests): each mode's findings."""
    pytest.importorskip("google.genai")
    tmp = tmp_path_factory.mktemp("echo")
    (tmp / "client.py").write_text(CLIENT)

    def route(req: ScriptedRequest) -> Reply:
        return Reply.say(ANSWER)

    with ScriptedUpstream(route, pieces=7) as fake:
        proc = progress.run(
            [*RECORDER, "run", "-o", "run.jsonl", "--confdir", str(tmp / "conf"),
             "--upstream", f"gemini={fake.url}", "--", sys.executable, "client.py", *MODES],
            capture_output=True,
            text=True,
            cwd=tmp,
            env=clean_env(GEMINI_API_KEY="test-gemini-key"),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the answer came back in pieces, cut mid-word: ten parts (each mode's first answer)
    lines = proc.stdout.splitlines()
    assert [lines[0], lines[2]] == [f"10 {ANSWER}"] * 2, proc.stdout
    run = open_run(tmp / "run.jsonl", whole=True, cache=False)
    convs = run.analysis.conversations
    assert [list(c.turns) for c in convs] == [[0, 1], [2, 3]]
    # (every finding is one conversation's: none of the run's left out below)
    assert {f.conversation for f in run.analysis.findings} <= {c.id for c in convs}
    return {
        mode: [f for f in run.analysis.findings if f.conversation == c.id]
        for mode, c in zip(MODES, convs, strict=True)
    }


def test_a_gemini_stream_sent_back_as_streamed_is_echoed(recorded) -> None:  # type: ignore[no-untyped-def]
    """Was: C.assistant_not_echoed (warning) on turn 1."""
    assert [(f.code, f.turn) for f in recorded["as-streamed"]] == []


def test_twin_a_chunk_dropped_on_the_way_back_is_not_echoed(recorded) -> None:  # type: ignore[no-untyped-def]
    found = recorded["drop"]
    assert [(f.code, f.severity, f.turn) for f in found] == [
        ("C.assistant_not_echoed", "warning", 1)
    ]
