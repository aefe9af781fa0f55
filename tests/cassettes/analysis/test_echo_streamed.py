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
from pathlib import Path

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
contents = [types.Content(role="user", parts=[types.Part(text="Greet me.")])]
for turn in range(2):
    parts = []
    for chunk in client.models.generate_content_stream(model="gemini-2.5-flash", contents=contents):
        if chunk.candidates and chunk.candidates[0].content and chunk.candidates[0].content.parts:
            parts += chunk.candidates[0].content.parts
    print(len(parts), "".join(p.text or "" for p in parts), flush=True)
    if sys.argv[1] == "drop":  # the bug: one chunk's part lost on the way back
        parts = parts[:3] + parts[4:]
    contents.append(types.Content(role="model", parts=parts))
    contents.append(types.Content(role="user", parts=[types.Part(text="Again, please.")]))
"""
ANSWER = "Hello there, friend! Hello again, my good friend, how are you today?"


def _record(tmp: Path, mode: str) -> list[Finding]:
    pytest.importorskip("google.genai")
    (tmp / "client.py").write_text(CLIENT)

    def route(req: ScriptedRequest) -> Reply:
        return Reply.say(ANSWER)

    with ScriptedUpstream(route, pieces=7) as fake:
        proc = progress.run(
            [*RECORDER, "run", "-o", "run.jsonl", "--confdir", str(tmp / "conf"),
             "--upstream", f"gemini={fake.url}", "--", sys.executable, "client.py", mode],
            capture_output=True,
            text=True,
            cwd=tmp,
            env=clean_env(GEMINI_API_KEY="test-gemini-key"),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the answer came back in pieces, cut mid-word: ten parts
    assert proc.stdout.splitlines()[0] == f"10 {ANSWER}", proc.stdout
    run = open_run(tmp / "run.jsonl", whole=True, cache=False)
    assert [list(c.turns) for c in run.analysis.conversations] == [[0, 1]]
    return list(run.analysis.findings)


def test_a_gemini_stream_sent_back_as_streamed_is_echoed(tmp_path: Path) -> None:
    """Was: C.assistant_not_echoed (warning) on turn 1."""
    assert [(f.code, f.turn) for f in _record(tmp_path, "as-streamed")] == []


def test_twin_a_chunk_dropped_on_the_way_back_is_not_echoed(tmp_path: Path) -> None:
    found = _record(tmp_path, "drop")
    assert [(f.code, f.severity, f.turn) for f in found] == [
        ("C.assistant_not_echoed", "warning", 1)
    ]
