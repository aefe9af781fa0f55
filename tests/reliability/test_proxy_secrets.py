"""No credential reaches the disk, whatever the family, the proxy mode and where the agent put it.

Every request carries a distinct random sentinel in every credential location an agent or SDK
uses: ``Authorization`` (Bearer, and AWS SigV4 for Bedrock), ``x-api-key``, ``x-goog-api-key``,
``api-key`` (Azure), ``Proxy-Authorization`` (Basic), two cookies, ``x-amz-security-token``, a
custom ``x-…-token`` header, the ``?key=`` and ``?api_key=`` query parameters (one with characters
that get URL-encoded), and JSON body keys (top-level ``api_key``, nested ``client_secret`` and
``password``); the upstream answers with a ``Set-Cookie`` holding one more. Sentinels are neutral
random strings, so only redaction by name (and the values it learned) can catch them, plus a few
in known key formats (``sk-…``, ``AIza…``, ``AKIA…``) pasted into message text, which only the
pattern net catches.

After the round trips of six families (OpenAI chat and Responses, Anthropic, Gemini, Ollama,
Bedrock) through the reverse listeners and the forward proxy, and one more to a host that is not
an LLM API's (``localhost`` here; an OpenAI Chat request: a model call whatever host it goes to,
issue 91 — tools' own HTTP is bench/tool_secrets.py's), every
file the recorder could have
written (the cassette directory, its mitmproxy confdir, and its ``TMPDIR``) is scanned byte-wise
for each sentinel in raw, URL-encoded, JSON-escaped and base64 (three alignments, standard and
URL-safe) forms. ``looptap verify`` must find the cassette clean, and must find the keys when they
are put back.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from looptap.cassettes.storage import read_records
from tests.support import progress
from tests.support.recorder import RecorderProcess, clean_env
from tests.support.reliability import MODES, find_on_disk, needs_recorder
from tests.support.upstream import FakeUpstream
from tests.support.wire import http_request

pytestmark = [needs_recorder]

FAMILIES = ("openai_chat", "openai_responses", "anthropic", "gemini", "ollama", "bedrock")
#: family → (reverse listener's variable, path, streamed?)
ROUTES: dict[str, tuple[str, str]] = {
    "openai_chat": ("OPENAI_BASE_URL", "/v1/chat/completions"),
    "openai_responses": ("OPENAI_BASE_URL", "/v1/responses"),
    "anthropic": ("ANTHROPIC_BASE_URL", "/v1/messages"),
    "gemini": ("GOOGLE_GEMINI_BASE_URL", "/v1beta/models/gemini-2.0-flash:streamGenerateContent"),
    "ollama": ("OLLAMA_BASE_URL", "/api/chat"),
    "bedrock": (
        "BEDROCK_BASE_URL",
        "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream",
    ),
}

LOCATIONS = (
    "authorization",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "proxy-authorization",
    "cookie-a",
    "cookie-b",
    "x-amz-security-token",
    "x-custom-auth-token",
    "query-key",
    "query-api_key",
    "body-api_key",
    "body-nested-client_secret",
    "body-list-password",
    "set-cookie",
)


def sentinel(loc: str, special: bool = False) -> str:
    # Neutral: no known key prefix, so only redaction by name can catch it.
    tail = "/x+y~z" if special else ""
    return f"lt{loc.replace('-', '')[:10]}Q{secrets.token_hex(12)}{tail}"


def fake_aws_key() -> str:
    return "AKIA" + "".join(secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))


def request_for(
    family: str, sec: dict[str, str], patterned: dict[str, str]
) -> tuple[str, list[tuple[str, str]], bytes]:
    """(target with query, headers, body) of one request of ``family`` carrying every sentinel."""
    _, path = ROUTES[family]
    text = (
        f"Summarise: my keys are {patterned['openai']} and "
        f"{patterned['google']}; aws {patterned['aws']}."
    )
    user = {"role": "user", "content": text}
    body: dict[str, Any]
    if family == "openai_chat":
        body = {"model": "gpt-4o", "messages": [user], "stream": True}
    elif family == "openai_responses":
        body = {"model": "gpt-4o", "input": text, "stream": True}
    elif family == "anthropic":
        body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [user], "stream": True}
    elif family == "gemini":
        body = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
    elif family == "ollama":
        body = {"model": "llama3.2", "messages": [user], "stream": True}
    else:
        body = {"messages": [{"role": "user", "content": [{"text": text}]}]}
    body["api_key"] = sec["body-api_key"]
    body["metadata"] = {"auth": {"client_secret": sec["body-nested-client_secret"]}}
    body["extra"] = [{"password": sec["body-list-password"]}]
    query = f"key={quote(sec['query-key'], safe='')}&api_key={quote(sec['query-api_key'], safe='')}"
    if family == "gemini":
        query = "alt=sse&" + query
    basic = base64.b64encode(f"agent:{sec['proxy-authorization']}".encode()).decode()
    headers = [
        ("content-type", "application/json"),
        ("x-api-key", sec["x-api-key"]),
        ("x-goog-api-key", sec["x-goog-api-key"]),
        ("api-key", sec["api-key"]),
        ("proxy-authorization", f"Basic {basic}"),
        ("cookie", f"session={sec['cookie-a']}; csrftoken={sec['cookie-b']}"),
        ("x-amz-security-token", sec["x-amz-security-token"]),
        ("x-custom-auth-token", sec["x-custom-auth-token"]),
        (
            "x-fake-upstream",
            "text; set_cookie_hex=" + f"sid={sec['set-cookie']}; Path=/; HttpOnly".encode().hex(),
        ),
    ]
    if family == "bedrock":
        headers.append(("x-amz-date", "20261122T010203Z"))
        headers.append(
            (
                "authorization",
                f"AWS4-HMAC-SHA256 Credential={patterned['aws']}/20261122/us-east-1/bedrock/"
                "aws4_request, SignedHeaders=content-type;host;x-amz-date, "
                f"Signature={sec['authorization']}",
            )
        )
    else:
        headers.append(("authorization", f"Bearer {sec['authorization']}"))
    return f"{path}?{query}", headers, json.dumps(body).encode()


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[FakeUpstream, RecorderProcess, Path]]:
    root = tmp_path_factory.mktemp("secrets")
    (root / "tmp").mkdir()
    (root / "cassettes").mkdir()
    with FakeUpstream(delay=0.0) as up:
        env = clean_env(TMPDIR=str(root / "tmp"))
        extra = [
            "--record-host",
            "127.0.0.1",
            "--upstream",
            f"ollama={up.url}",
            "--upstream",
            f"bedrock={up.url}",
        ]
        with RecorderProcess(
            root / "cassettes" / "run.jsonl", root / "conf", up.url, *extra, env=env
        ) as rec:
            yield up, rec, root


@pytest.fixture(scope="module")
def recorded(setup: tuple[FakeUpstream, RecorderProcess, Path]) -> dict[str, Any]:
    """All families × both modes sent; the recorder stopped (everything flushed)."""
    up, rec, root = setup
    all_secrets: list[str] = []
    sent = []
    for family, mode in [*((f, m) for f in FAMILIES for m in MODES), ("openai_chat", "tool")]:
        sec = {loc: sentinel(loc, special=loc == "query-api_key") for loc in LOCATIONS}
        patterned = {
            "openai": f"sk-proj-{secrets.token_hex(20)}",
            "google": "AIza" + secrets.token_hex(18)[:35],
            "aws": fake_aws_key(),
        }
        all_secrets += [*sec.values(), *patterned.values()]
        target, headers, body = request_for(family, sec, patterned)
        if mode == "reverse":
            resp = http_request(
                "127.0.0.1", rec.port(ROUTES[family][0]), "POST", target, headers, body
            )
        else:  # through the forward proxy: to an LLM API's host, or to a tool's
            resp = http_request(
                "127.0.0.1",
                rec.forward_port,
                "POST",
                target,
                headers,
                body,
                proxy=True,
                upstream=up.url if mode == "forward" else up.url.replace("127.0.0.1", "localhost"),
            )
        assert resp.complete, (family, mode, resp.error)
        sent.append((family, mode, resp.status))
    rc = rec.stop()
    return {
        "secrets": all_secrets,
        "sent": sent,
        "rc": rc,
        "root": root,
        "out": rec.out,
        "log": rec.output,
        "upstream": up,
    }


def test_the_upstream_set_its_cookie(recorded: dict[str, Any]) -> None:
    up: FakeUpstream = recorded["upstream"]
    cookies = [v for s in up.served for k, v in s.response_headers if k == "set-cookie"]
    assert len(cookies) == 9 and all(c.startswith("sid=ltsetcookieQ") for c in cookies)


def test_every_round_trip_is_recorded(recorded: dict[str, Any]) -> None:
    assert recorded["rc"] == 0, recorded["log"]
    cas = read_records(recorded["out"])
    assert not cas.problems
    assert len(cas.exchanges) == len(FAMILIES) * len(MODES) + 1
    statuses = [ex.status for ex in cas.exchanges]
    assert statuses == [s for _, _, s in recorded["sent"]]
    # The served families answered 200 with a Set-Cookie; Ollama and Bedrock got the upstream's 404.
    assert statuses.count(200) == 9 and statuses.count(404) == 4
    # the last, an OpenAI Chat request to another host, is a model call all the same (issue 91:
    # a model request is a model call whatever form or host it comes in; before, a tool call)
    assert [ex.tool for ex in cas.exchanges] == [False] * len(cas.exchanges)


def test_the_upstream_received_the_credentials(recorded: dict[str, Any]) -> None:
    """Redaction is of the record, never of the traffic: the upstream got every header as sent."""
    up: FakeUpstream = recorded["upstream"]
    llm = [s for s in up.served if s.method == "POST"]
    assert len(llm) == len(FAMILIES) * len(MODES) + 1
    for s in llm:
        assert (s.request_header("x-api-key") or "").startswith("ltxapikeyQ")
        assert "session=lt" in (s.request_header("cookie") or "")
        assert (s.request_header("authorization") or "").startswith(
            ("Bearer lt", "AWS4-HMAC-SHA256 Credential=AKIA")
        )
        assert b'"api_key": "lt' in s.request_body and "key=lt" in s.target


def test_no_sentinel_on_disk_in_any_form(recorded: dict[str, Any]) -> None:
    root: Path = recorded["root"]
    secrets_ = recorded["secrets"]
    assert len(secrets_) == (len(FAMILIES) * len(MODES) + 1) * (len(LOCATIONS) + 3)
    files = [p for p in root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in files)
    hits = find_on_disk(root, secrets_)
    assert not hits, "\n".join(hits)


def test_no_sentinel_in_the_recorders_output(recorded: dict[str, Any]) -> None:
    log: str = recorded["log"]
    leaked = [s for s in recorded["secrets"] if s in log or quote(s, safe="") in log]
    assert not leaked, log[-3000:]


def test_redacted_cassette_keeps_what_debugging_needs(recorded: dict[str, Any]) -> None:
    """Redaction leaves the names, the shape and the non-secret content readable."""
    cas = read_records(recorded["out"])
    for ex in cas.exchanges:
        names = {k.lower() for k, _ in ex.request_headers}
        assert {"authorization", "x-api-key", "cookie", "x-goog-api-key"} <= names
        assert ex.request_header("authorization") in (
            "Bearer [REDACTED]",
            "AWS4-HMAC-SHA256 [REDACTED]",
        )
        body = ex.request_json()
        assert (
            body["api_key"] == "[REDACTED]"
            and body["metadata"]["auth"]["client_secret"] == "[REDACTED]"
        )
        assert "Summarise: my keys are" in json.dumps(body)
        assert "key=REDACTED" in ex.url and "api_key=REDACTED" in ex.url


def _verify(*args: str) -> subprocess.CompletedProcess[str]:
    return progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "verify", *args],
        capture_output=True,
        text=True,
    )


def test_looptap_verify_finds_the_recorded_cassette_clean(recorded: dict[str, Any]) -> None:
    proc = _verify(str(recorded["out"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""


def test_looptap_verify_finds_keys_put_back(recorded: dict[str, Any], tmp_path: Path) -> None:
    """The same cassette with known-format keys restored in a header, a URL, a body and a stream
    chunk: verify exits 1 and names each file:line:field."""
    lines = recorded["out"].read_bytes().splitlines()
    rec = json.loads(lines[1])
    rec["request"]["headers"].append(["authorization", "Bearer sk-ant-api03-" + "Q" * 40])
    rec["url"] += "&key=AIza" + "x" * 35
    rec["request"]["body"] = {"json": {"note": "ghp_" + "a" * 36}}
    lines[1] = json.dumps(rec).encode()
    leaky = tmp_path / "leaky.jsonl"
    leaky.write_bytes(b"\n".join(lines) + b"\n")
    proc = _verify(str(leaky))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert f"{leaky}:2:request.headers[authorization]:" in out
    assert f"{leaky}:2:url:" in out and "google api key" in out
    assert f"{leaky}:2:request.body.json.note: github token" in out
    assert "Q" * 40 not in out, "verify must not print the secret it found"
