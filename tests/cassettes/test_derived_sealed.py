"""Issue 101 (session 50), item 1: every file looptap makes from a cassette is sealed again as it
is written (docs/redaction.md, "One gate"). A cassette from an older looptap, or edited by hand,
holds what its own redaction missed; before, every export, page, fleet index and kept analysis
made from it copied that. Here a real recording (pydantic-ai's OpenAI tool-call cassette, in the
corpus) is written as a looptap whose redaction did nothing would have written it, with
credentials of ten classes planted in a model's message, its answer and a tool's HTTP call; then
``export --har --otel``, ``export --html``, ``show`` (its kept analysis), ``index`` and ``fleet
page`` are made from it in this process, and not one 8-character piece of any planted value is
in any file they wrote."""

from __future__ import annotations

import base64
import dataclasses
import json
import sys
from pathlib import Path

import pytest
from real_corpus import CORPUS, load

from looptap.cassettes.recording import Redactor
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange
from tests.support.analysed import cli_output, keep_every_run

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))  # (last: bench/mcp.py)
from tool_secrets import _duckdb_text, _sqlite_text  # (how the bench reads them)

RUN = CORPUS / "pydantic-ai/tests/models/cassettes/test_openai/test_openai_tool_output.yaml"

#: One credential of each class, in the format its issuer documents (random-looking, fixed).
PLANTED = {
    "openai key": "sk-proj-Q7vK2mX9pL4rT8wN3bZ6cY1dF5gH0jS2aE7uI4oP9kM3nB6vC8xZ1qW5",
    "github token": "ghp_R4tY7uI0oP3aS6dF9gH2jK5lZ8xC1vB4nM7q",
    "notion secret": "secret_Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0Ef3Hi6Kl9No2Q",
    "discord bot token": "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs-Rq9z",
    "mailgun key": "key-3af6d0b29e8d6fd54ac373a5b9e7e0f1",
    "url password": "Zq8vLm2Xp4RtW6",
    "json password": "hunter2-Kx91-Lw07",
    "private key": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
    "base64 password": "b64-Pa55-Qw3rTy9",
    "slack token": "xoxb-263594206564-2343009813398-Hq3Wn7Zk8Lp2Xv5Rt9Mb4Cd1",
}


#: base64 of ``{"password": …}``: no format, found by decoding it (its tail encodes the value).
B64 = base64.b64encode(json.dumps({"password": PLANTED["base64 password"]}).encode()).decode()
#: Each value as it stands in the file.
WRITTEN = {**PLANTED, "base64 password": B64[16:]}


def _pieces(secret: str) -> set[str]:
    return {secret[i : i + 8] for i in range(len(secret) - 7)}


def _leaks(text: str) -> list[str]:
    return sorted(n for n, s in WRITTEN.items() if any(p in text for p in _pieces(s)))


class _Older(Redactor):
    """A looptap whose redaction knew none of these (a cassette written before, or by hand)."""

    def exchange(self, ex: Exchange) -> Exchange:
        return ex


def _planted(path: Path) -> None:
    p = PLANTED
    pem = f"-----BEGIN PRIVATE KEY-----\n{p['private key']}\n"
    first, *rest = load(RUN)
    body = json.loads(first.request_body)
    body["messages"].append(
        {"role": "user", "content": f"deploy with {p['openai key']} and {p['github token']}"}
    )
    chunks = [(None, c.replace(b'"content":null', f'"content":"{p["slack token"]}"'.encode()))
              for _, c in first.response_chunks]  # fmt: skip
    first = dataclasses.replace(
        first,
        request_body=json.dumps(body).encode(),
        request_headers=[*first.request_headers, ("authorization", f"Bearer {p['openai key']}")],
        response_chunks=chunks,
    )
    body = {"args": {"password": p["json password"]}, "items": ["a", p["discord bot token"]],
            "cfg": B64, "page": {"token_ref": p["notion secret"]}}  # fmt: skip
    tool = Exchange(
        method="POST",
        url=f"http://app:{p['url password']}@tools.example.test/v1/pages",
        request_headers=[("content-type", "application/json")],
        request_body=json.dumps(body).encode(),
        status=200,
        response_headers=[("content-type", "text/plain")],
        response_chunks=[(None, f"sent with {p['mailgun key']}\n{pem}".encode())],
        tool=True,
    )
    with CassetteWriter(path, redactor=_Older()) as w:
        for ex in (first, tool, *rest):
            w.append(ex)


def test_every_file_made_from_an_unsealed_cassette_holds_none_of_its_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    runs.mkdir()
    out.mkdir()
    run = runs / "old.jsonl"
    _planted(run)
    assert _leaks(run.read_text()) == sorted(PLANTED)  # (planted: the test can fail)
    pytest.importorskip("duckdb")  # (the fleet extra)
    cache = keep_every_run(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    for argv in (
        ["export", "-q", "--har", str(out / "run.har"), "--otel", str(out / "otel.json"), str(run)],
        ["export", "-q", "--html", str(run), "-o", str(out / "run.html")],
        ["show", str(run)],
        ["index", str(runs), "-o", str(out / "fleet.duckdb")],
        ["fleet", "page", "--fleet", str(out / "fleet.duckdb"), "-o", str(out / "fleet.html")],
    ):
        rc, _, err = cli_output(*argv)
        assert rc in (0, 1), (argv, err)
    wrote = {
        f.name: _duckdb_text(f) if f.suffix == ".duckdb" else f.read_text("utf-8", "replace")
        for f in sorted(out.rglob("*"))
        if f.is_file() and not f.name.endswith(".wal")
    }
    wrote |= {f"kept {f.name}": _sqlite_text(f) for f in sorted(cache.rglob("*.sqlite"))}
    for name in ("run.har", "otel.json", "run.html", "fleet.duckdb", "fleet.html"):
        assert wrote.get(name), (name, sorted(wrote))
    assert any(n.startswith("kept ") for n in wrote), sorted(wrote)
    found = {name: _leaks(text) for name, text in wrote.items()}
    assert not any(found.values()), {n: f for n, f in found.items() if f}
