"""LangChain's own cassettes (issue 69 item 4): the gzipped YAML with ``requests:`` /
``responses:`` lists that every LangChain partner package records its tests in, read by every
command as vcrpy's are, gzipped or not. The files are real (tests/interop/fixtures/langchain,
taken from the langchain-anthropic 0.3.22 and langchain-openai 0.3.33 sdists on PyPI)."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from looptap.cassettes.reading import open_run, sniff
from looptap.cassettes.replay.serving.server import ReplayServer
from looptap.cassettes.storage import read_records
from tests.interop.cassette_files import FIXTURES, REPO
from tests.support import progress

LANGCHAIN = FIXTURES / "langchain"
THINKING = LANGCHAIN / "anthropic_test_thinking.yaml.gz"  # Anthropic Messages, JSON and stream
REASONING = LANGCHAIN / "openai_test_reasoning.yaml.gz"  # OpenAI Responses, its URL masked
SCHEMA = LANGCHAIN / "openai_test_schema_parsing_failures.yaml.gz"  # Chat, and LangSmith calls


def looptap(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


def test_a_gzipped_langchain_cassette_is_told_by_what_it_holds() -> None:
    for f in (THINKING, REASONING, SCHEMA):
        assert sniff(f.read_bytes()[:4096]) == "vcr", f.name
    assert sniff(gzip.compress(b"not yaml \x00\x01" * 50)) == "unknown"
    assert sniff(gzip.compress(gzip.compress(b"requests: []\n"))) == "unknown"


def test_anthropic_thinking_reads_as_recorded(tmp_path: Path) -> None:
    out = tmp_path / "thinking.jsonl"
    r = looptap("import", str(THINKING), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "3 round trips, 3 LLM (anthropic 3)" in r.stdout
    run = open_run(out)
    rts = list(run.roundtrips)
    assert [rt.family for rt in rts] == ["anthropic"] * 3
    assert [rt.stream for rt in rts] == [False, True, False]  # every header value is masked
    assert [rt.status for rt in rts] == [200, 200, 200]
    assert all(rt.response and rt.response.text.startswith("Hello! It's nice") for rt in rts[:2])
    assert [(rt.response.usage.input_tokens, rt.response.usage.output_tokens) for rt in rts] == [
        (36, 92),
        (36, 95),
        (107, 116),
    ]
    assert len(run.conversations) == 2 and len(run.turns) == 3
    assert not run.findings()


def test_openai_with_its_url_masked_reads_as_the_api_its_bodies_speak(tmp_path: Path) -> None:
    run = open_run(REASONING)
    rts = list(run.roundtrips)
    assert [rt.family for rt in rts] == ["openai_responses"] * 2
    assert [rt.stream for rt in rts] == [False, True]
    assert [rt.response.text for rt in rts if rt.response] == [
        "Hello! How can I assist you today?",
        "Hello! How can I help you today?",  # the stream, its deltas joined
    ]
    ex = run.exchanges[0]
    assert ex.url == "https://api.openai.com/v1/responses"
    assert any("masked the URL" in n and "inferred" in n for n in ex.notes), ex.notes
    assert not run.findings()
    chat = open_run(SCHEMA)
    assert chat.families == {"none": 2, "openai_chat": 1}  # LangSmith's calls, then the model's
    (llm,) = [rt for rt in chat.roundtrips if rt.family == "openai_chat"]
    assert llm.response and llm.response.text == '{"response":"good"}'
    r = looptap("show", str(SCHEMA))
    assert r.returncode == 0 and "api.openai.com/v1/chat/completions" in r.stdout, r.stderr


def test_a_langchain_directory_and_an_uncompressed_file_import(tmp_path: Path) -> None:
    src = tmp_path / "cassettes"
    src.mkdir()
    for f in (THINKING, REASONING):
        shutil.copy(f, src / f.name)
    (src / "plain.yaml").write_bytes(gzip.decompress(THINKING.read_bytes()))  # not gzipped
    (src / "notes.txt.gz").write_bytes(gzip.compress(b"not a cassette"))  # not picked up
    r = looptap("import", str(src), "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["anthropic_test_thinking.jsonl", "openai_test_reasoning.jsonl", "plain.jsonl"]
    one = read_records(tmp_path / "out" / "plain.jsonl")
    two = read_records(tmp_path / "out" / "anthropic_test_thinking.jsonl")
    assert [e.response_body for e in one.exchanges] == [e.response_body for e in two.exchanges]
    r = looptap("import", str(REASONING), cwd=tmp_path)  # no -o: NAME.jsonl, not NAME.yaml.jsonl
    assert r.returncode == 0 and (tmp_path / "openai_test_reasoning.jsonl").is_file(), r.stderr


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (THINKING.read_bytes()[:-200], "gzip data cut short"),
        (gzip.compress(b"requests:\n- {method: GET, uri: x}\n"), "without its 'responses'"),
        (gzip.compress(b"requests: []\nresponses: [{}]\n"), "1 response to 0 requests"),
    ],
    ids=["cut", "no-responses", "more-responses"],
)
def test_a_damaged_langchain_cassette_gets_one_line(
    data: bytes, words: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml.gz"
    bad.write_bytes(data)
    r = looptap("import", str(bad), "-o", str(tmp_path / "x.jsonl"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and words in r.stderr, r.stderr
    assert not (tmp_path / "x.jsonl").exists()


def test_import_help_names_every_format_it_reads() -> None:
    """Issue 71 item 9: the help named only vcrpy and mitmproxy files."""
    r = looptap("import", "--help")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    for name in ("vcrpy", "LangChain", "mitmproxy", "OTLP", "OpenInference", "trajector"):
        assert name in text, name
    for suffix in ("*.yaml.gz", "*.mitm", "*.jsonl", "*.otlp", "*.pb"):
        assert suffix in text, suffix
    top = " ".join(looptap("--help").stdout.split())
    assert "import vcrpy and LangChain cassettes, mitmproxy flows, OTLP traces and chat" in top


def test_verify_reads_a_gzipped_cassette(tmp_path: Path) -> None:
    """A key in a LangChain cassette is found, not hidden by the gzip (``verify`` called such a
    file clean: it scanned the compressed bytes); in a directory ``*.yaml.gz`` is scanned too."""
    key = "sk-proj-" + "Qm4xT8vLp2Zr6Wn1Kd9Bs3Hy7Gc5Fj0Ae" * 2
    unmasked = f"x-api-key:\n    - {key}".encode()  # a header its recorder did not mask
    doc = gzip.decompress(THINKING.read_bytes()).replace(
        b"x-api-key:\n    - '**REDACTED**'", unmasked, 1
    )
    assert key.encode() in doc
    (tmp_path / "leaky.yaml.gz").write_bytes(gzip.compress(doc))
    shutil.copy(THINKING, tmp_path / THINKING.name)
    r = looptap("verify", str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "leaky.yaml.gz: 1 secret found" in r.stderr and f"{THINKING.name}: clean" in r.stderr
    assert key not in r.stdout + r.stderr


@pytest.mark.parametrize("cassette", [THINKING, REASONING], ids=["anthropic", "openai-masked-url"])
def test_a_langchain_cassette_is_replayed_to_the_sdk_it_came_from(cassette: Path) -> None:
    """The replay server serves each recorded request its answer (the masked URL served at the
    endpoint its bodies speak)."""
    run = open_run(cassette)
    with ReplayServer(cassette) as server:
        for ex in run.exchanges:
            path = "/" + ex.url.split("/", 3)[3]
            req = urllib.request.Request(server.url + path, data=ex.request_body, method="POST",
                                         headers={"content-type": "application/json"})  # fmt: skip
            with urllib.request.urlopen(req, timeout=30) as resp:
                assert resp.status == 200 and resp.read() == ex.response_body
        assert not server.misses
