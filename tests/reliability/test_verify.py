"""``looptap verify``: finds every known key format wherever it hides in a cassette, reports
file:line:field without printing the secret, exits 1 on a find and 0 when clean; and the byte-wise
disk scanner the secrets tests rely on catches every encoded form."""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from real_corpus import CORPUS

from looptap.cassettes.cli import main
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import load_vcr
from looptap.cassettes.verify import scan_file, scan_lines
from looptap.cassettes.wire import Exchange
from tests.support import progress
from tests.support.reliability import encoded_forms, find_on_disk

KEYS = {
    "openai": "sk-proj-" + secrets.token_urlsafe(30),
    "anthropic": "sk-ant-api03-" + secrets.token_urlsafe(40),
    "google": "AIza" + "Sy" + secrets.token_hex(17)[:33],
    "aws": "AKIA" + "".join(secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16)),
    "github": "ghp_" + secrets.token_hex(18),
    "slack": "xoxb-" + secrets.token_hex(12) + "-" + secrets.token_hex(6),
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9." + secrets.token_urlsafe(24),
}


def _verify(*args: str) -> subprocess.CompletedProcess[str]:
    return progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "verify", *args],
        capture_output=True,
        text=True,
    )


_CLEAN: dict[str, bytes] = {}


def _clean_cassette(path: Path) -> Path:
    """A real recording (Anthropic tool loop, 11 round trips) written by the core (redacted)."""
    if "bytes" not in _CLEAN:
        with CassetteWriter(path) as w:
            for ex in load_vcr(
                CORPUS / "pydantic-ai/tests/cassettes/test_tool_search/"
                "test_tool_search_eval[anthropic].yaml"
            ):
                w.append(ex)
        _CLEAN["bytes"] = path.read_bytes()
    path.write_bytes(_CLEAN["bytes"])
    return path


def test_patterns_are_the_redactors() -> None:
    """One detector: verify scans with exactly the rules the redactor masks with."""
    import looptap.cassettes.verify as verify
    from looptap.cassettes.recording import Redactor

    def rules(d: Any) -> list[tuple[str, str]]:
        return [(r.id, r.source) for r in d.rules]

    assert rules(verify.Scanner(["corp-[0-9]{6}"]).detector) == rules(
        Redactor(["corp-[0-9]{6}"])._scrubber.detector
    )
    assert len(verify.Scanner([]).detector.rules) > 200  # gitleaks' ruleset and looptap's


def test_clean_cassette_exits_0_and_a_leak_exits_1(tmp_path: Path) -> None:
    """Through the real ``looptap`` command (the entry point registered in pyproject.toml)."""
    path = _clean_cassette(tmp_path / "clean.jsonl")
    proc = _verify(str(path))
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr
    assert "clean" in proc.stderr
    with path.open("ab") as f:
        f.write(b'{"type":"note","text":"' + KEYS["openai"].encode() + b'"}\n')
    proc = _verify(str(path))
    assert proc.returncode == 1 and f"{path}:13:text: openai/anthropic key" in proc.stdout, (
        proc.stdout
    )


@pytest.mark.parametrize("kind", list(KEYS))
@pytest.mark.parametrize(
    "where",
    ["header", "url", "body", "chunk", "b64-body", "url-encoded", "basic-auth", "torn-line"],
)
def test_each_key_format_found_wherever_it_hides(
    kind: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = KEYS[kind]
    lines = _clean_cassette(tmp_path / "c.jsonl").read_bytes().splitlines()
    rec = json.loads(lines[3])
    field = {
        "header": "request.headers[x-leak]",
        "url": "url",
        "body": "request.body.json.leak",
        "chunk": "response.body",
        "b64-body": "request.body.b64",
        "url-encoded": "url",
        "basic-auth": "request.headers[authorization]",
        "torn-line": "(not JSON)",
    }[where]
    if where == "header":
        rec["request"]["headers"].append(["x-leak", key])
    elif where == "url":
        rec["url"] += f"?key={key}"
    elif where == "body":
        rec["request"]["body"] = {"json": {"leak": f"my key is {key}, keep it safe"}}
    elif where == "chunk":
        rec["response"]["body"] = {
            "chunks": [[0.0, 'data: {"a": 1}\n\n'], [0.1, f'data: {{"k": "{key}"}}\n\n']]
        }
        field = "response.body.chunks[1][1]"
    elif where == "b64-body":
        rec["request"]["body"] = {
            "b64": base64.b64encode(b"\xff\xfe binary " + key.encode() + b" \x00").decode()
        }
    elif where == "url-encoded":
        rec["url"] += "?q=" + quote(f"x {key} y", safe="")
    elif where == "basic-auth":
        rec["request"]["headers"].append(
            ["authorization", "Basic " + base64.b64encode(f"user:{key}".encode()).decode()]
        )
    line = json.dumps(rec).encode()
    if where == "torn-line":
        line = line[: line.index(b'"url"')] + b'"leak": "' + key.encode()  # no newline, not JSON
    lines[3] = line
    path = tmp_path / "leaky.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"" if where == "torn-line" else b"\n"))
    finds = scan_file(path)
    assert finds, f"{kind} key in {where} not found"
    assert {f.line for f in finds} == {4}
    assert any(f.field == field for f in finds), [str(f) for f in finds]
    assert main(["verify", str(path)]) == 1
    out, err = capsys.readouterr()
    assert f"{path}:4:{field}:" in out
    assert key not in out and key[8:] not in out and key not in err


def test_configured_patterns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _clean_cassette(tmp_path / "c.jsonl")
    lines = path.read_bytes().splitlines()
    lines[2] = lines[2].replace(
        b'"type":"exchange"', b'"type":"exchange","internal":"corp-tok-123456"'
    )
    path.write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.chdir(tmp_path)
    assert main(["verify", str(path)]) == 0  # not a known format
    assert scan_file(path, [r"corp-tok-\d{6}"])[0].field == "internal"
    assert main(["verify", str(path), "--pattern", r"corp-tok-\d{6}"]) == 1
    # From [tool.looptap.verify] in ./pyproject.toml, and from --config.
    (tmp_path / "pyproject.toml").write_text(
        '[tool.looptap.verify]\npatterns = ["corp-tok-[0-9]+"]\n'
    )
    assert main(["verify", str(path)]) == 1
    # The recorder's [tool.looptap.redact] patterns are scanned for as well.
    (tmp_path / "pyproject.toml").write_text(
        '[tool.looptap.redact]\npatterns = ["corp-tok-[0-9]+"]\n'
    )
    assert main(["verify", str(path)]) == 1
    (tmp_path / "pyproject.toml").write_text('[tool.looptap.redact]\npatterns = ["other-[0-9]+"]\n')
    assert main(["verify", str(path)]) == 0
    (tmp_path / "pyproject.toml").unlink()
    cfg = tmp_path / "verify.toml"
    cfg.write_text('patterns = ["tok-1234"]\n')
    assert main(["verify", str(path), "--config", str(cfg)]) == 1


def test_errors_exit_2(tmp_path: Path) -> None:
    assert main(["verify", str(tmp_path / "missing.jsonl")]) == 2
    path = _clean_cassette(tmp_path / "c.jsonl")
    assert main(["verify", str(path), "--pattern", "(unclosed"]) == 2
    bad = tmp_path / "bad.toml"
    bad.write_text("patterns = 3\n")
    assert main(["verify", str(path), "--config", str(bad)]) == 2


def test_redacted_values_are_not_finds() -> None:
    lines = [
        json.dumps(
            {
                "request": {
                    "headers": [["authorization", "Bearer [REDACTED]"], ["x-api-key", "[REDACTED]"]]
                },
                "url": "https://x/v1?key=REDACTED",
            }
        ).encode()
    ]
    assert scan_lines(lines) == []


def test_a_url_urlsplit_refuses_is_scanned_not_a_traceback() -> None:
    """A hostile file's URL that ``urlsplit`` refuses (an unclosed IPv6 bracket) is no traceback,
    and a credential in its path is still found."""
    token = "123456:AAE" + secrets.token_hex(16)
    lines = [
        json.dumps({"url": "http://[::1"}).encode(),
        json.dumps({"url": f"http://[::1/bot{token}/getMe?x=1"}).encode(),
    ]
    found = [(f.line, f.field, f.kind) for f in scan_lines(lines)]
    # (the token is found by its own format too, issue 101's Telegram rule: both are said)
    want = [(2, "url", "telegram bot token"), (2, "url", "a credential in the path")]
    assert found == want, found


def test_fields_are_named_in_the_path_syntax_in_document_order() -> None:
    """A find's field is written as ignore rules and diffs write a place (a key that is not a
    name as ``["$defs"]``), headers by their name, and finds come in the order of the record."""
    key = KEYS["openai"]
    rec = {
        "request": {
            "headers": [["x-leak", key]],
            "body": {"json": {"$defs": {"a b": key}, "tools": [{"password": "hunter22"}]}},
        },
        "response": {"body": {"json": {"api_key": "k" * 12}}},
    }
    finds = scan_lines([json.dumps(rec).encode()])
    assert [f.field for f in finds] == [
        "request.headers[x-leak]",
        'request.body.json["$defs"]["a b"]',
        "request.body.json.tools[0].password",
        "response.body.json.api_key",
    ], [str(f) for f in finds]


def test_disk_scanner_catches_every_encoded_form(tmp_path: Path) -> None:
    """The scanner behind the proxy secrets tests is not blind: each form of a secret, embedded at
    any offset in text, is found."""
    secret = "ltQ" + secrets.token_hex(12) + "/x+y"
    for i, form in enumerate(encoded_forms(secret).values()):
        (tmp_path / f"{i}.bin").write_bytes(b"prefix " + form + b" suffix")
    for k, pre in enumerate([b"", b"a", b"ab", b"abc", b"user:"]):
        for alt in (False, True):
            enc = base64.b64encode(pre + secret.encode() + b"tail")
            if alt:
                enc = enc.replace(b"+", b"-").replace(b"/", b"_")
            (tmp_path / f"b64-{k}-{alt}.bin").write_bytes(b"x" + enc + b"y")
    files = sorted(p.name for p in tmp_path.iterdir())
    hits = find_on_disk(tmp_path, [secret])
    assert {h.split(":")[0].rsplit("/", 1)[1] for h in hits} == set(files)
    assert find_on_disk(tmp_path, ["ltQ-not-there-0123456789"]) == []


def test_verify_reads_a_whole_corpus_file_quickly(tmp_path: Path) -> None:
    """Scanning is linear: a 2.5 MB cassette takes well under the time to record it."""
    import time

    path = tmp_path / "big.jsonl"
    with CassetteWriter(path) as w:
        for i in range(100):
            w.append(
                Exchange(
                    method="POST",
                    url="https://api.openai.com/v1/chat/completions",
                    request_body=json.dumps(
                        {
                            "model": "m",
                            "messages": [
                                {"role": "user", "content": f"{i} " + "lorem ipsum " * 2000}
                            ],
                        }
                    ).encode(),
                    status=200,
                    response_chunks=[(0.0, b'{"choices": []}')],
                )
            )
    t = time.perf_counter()
    assert scan_file(path) == []
    assert time.perf_counter() - t < 20
