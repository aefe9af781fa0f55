"""Safety a user assumes (issue 71 item 13): an upstream that echoes ``authorization=Bearer KEY``
in a gzip body and resets mid-body left the key's first characters in the cassette, and ``looptap
verify`` called the file clean; a cache directory found with mode 0777 was used as it was.

A body cut in a key holds too little of it for any format to find, and it is not the value the
run learned: the redactor masks the end of a cut body from a ``Bearer`` or a credential's name
on (or from the first characters of a value it learned), and ``verify`` reads the end of a cut
body, decoded as far as it goes, the same way. The recorder's own path is tested end to end in
tests/proxy/test_torn_gzip_echo.py."""

from __future__ import annotations

import base64
import os
import secrets
import stat
import sys
import zlib
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.reading import keep
from looptap.cassettes.recording import Redactor
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import read_records
from looptap.cassettes.verify import scan_file
from looptap.cassettes.wire import Exchange, decode_exchange
from tests.support import progress
from tests.support.huge import write_huge
from tests.support.recorder import clean_env

URL = "https://api.openai.com/v1/chat/completions"


def _key() -> str:
    return "sk-proj-" + secrets.token_urlsafe(36).replace("-", "x").replace("_", "y")


def torn_gzip(before: str, secret_part: str, after: str) -> tuple[bytes, bytes]:
    """(the whole gzip body, the bytes an upstream sent before it reset): what was sent decodes
    to exactly ``before + secret_part`` (a sync flush there), the rest never arrived."""
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    head = z.compress((before + secret_part).encode()) + z.flush(zlib.Z_SYNC_FLUSH)
    return head + z.compress(after.encode()) + z.flush(), head


def _cut_exchange(key: str, body: bytes, ctype: str, sent: int) -> Exchange:
    ex = Exchange(
        "POST",
        URL,
        [("authorization", f"Bearer {key}"), ("content-type", "application/json")],
        b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}',
        status=200,
        response_headers=[("content-encoding", "gzip"), ("content-type", ctype)],
        response_chunks=[(0.01, body[: sent // 2]), (0.02, body[sent // 2 : sent])],
        transport_error="Server disconnected.",
    )
    ex.response_encoded = True
    decode_exchange(ex)
    return ex


@pytest.mark.parametrize("shown", [1, 4, 9, 20])
@pytest.mark.parametrize(
    ("ctype", "before"),
    [
        ("text/plain", "your request's headers:\nauthorization=Bearer "),
        ("application/json", '{"echo": {"authorization": "Bearer '),
        ("text/event-stream", 'data: {"delta": "x-api-key: '),
    ],
    ids=["text", "json", "sse"],
)
def test_a_key_cut_by_a_reset_does_not_reach_the_cassette(
    shown: int, ctype: str, before: str, tmp_path: Path
) -> None:
    key = _key()
    whole, sent = torn_gzip(before, key[:shown], key[shown:] + '"}}\n' + "filler " * 40)
    ex = _cut_exchange(key, whole, ctype, len(sent))
    assert ex.response_body.decode().endswith(key[:shown])  # the decoded prefix ends in the key
    out = tmp_path / "run.jsonl"
    with CassetteWriter(out) as w:
        w.append(ex)
    raw = out.read_bytes().decode()
    assert not any(key[:n] in raw for n in range(4, shown + 1)), raw[-300:]
    (stored,) = read_records(out).exchanges
    assert stored.response_body.decode() == before + "[REDACTED]"  # what came before is kept
    assert stored.transport_error == "Server disconnected."
    assert scan_file(out) == []  # what the redactor stored is clean, and verify says so


def test_the_end_of_a_cut_body_is_masked_only_where_a_credential_is() -> None:
    """Words at the cut, a name that is not a credential's, a complete body: kept as they are."""
    red = Redactor()
    for tail in ('{"color": "blu', "the next token", '{"max_tokens": 12', '{"key": "colo'):
        ex = Exchange("POST", URL, status=200, response_chunks=[(0.0, tail.encode())],
                      transport_error="reset")  # fmt: skip
        assert red.exchange(ex).response_body.decode() == tail
    whole = Exchange("POST", URL, status=200, response_chunks=[(0.0, b"Bearer abc")])
    assert red.exchange(whole).response_body == b"Bearer abc"  # not cut: a format's to judge


def _record(rec: dict[str, object]) -> bytes:
    header = {"type": "header", "format": "looptap-cassette", "format_version": 1, "meta": {}}
    return orjson.dumps(header) + b"\n" + orjson.dumps(rec) + b"\n"


@pytest.mark.parametrize("stored", ["decoded", "compressed"])
def test_verify_reads_the_end_of_a_cut_body(stored: str, tmp_path: Path) -> None:
    """A cassette written before this redaction (or by hand): the cut key is found, printed as
    its length only; decoded as far as it goes when the body was kept compressed."""
    key = _key()
    _whole, sent = torn_gzip("authorization=Bearer ", key[:9], key[9:] + "\n" * 50)
    text = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(sent)
    body = (
        {"text": text.decode()} if stored == "decoded" else {"b64": base64.b64encode(sent).decode()}
    )
    rec = {
        "type": "exchange",
        "seq": 0,
        "method": "POST",
        "url": URL,
        "request": {"headers": [["authorization", "Bearer [REDACTED]"]], "body": None},
        "response": {"status": 200, "headers": [["content-encoding", "gzip"]], "body": body},
        "transport_error": "Server disconnected.",
    }
    path = tmp_path / "old.jsonl"
    path.write_bytes(_record(rec))
    (find,) = scan_file(path)
    assert find.kind == "a credential cut short by the end of a cut body"
    assert key[:4] not in str(find) and "9 chars" in str(find), str(find)
    r = progress.run([sys.executable, "-m", "looptap.cassettes.cli", "verify", str(path)],
                     capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 1 and "clean" not in r.stderr + r.stdout, r.stdout + r.stderr
    assert key[:4] not in r.stdout + r.stderr
    rec.pop("transport_error")  # a whole body ending so is a format's to judge
    path.write_bytes(
        _record({**rec, "response": {"status": 200, "headers": [], "body": {"text": "ok"}}})
    )
    assert scan_file(path) == []


def _show(run: Path, cache: Path) -> tuple[int, str]:
    r = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "show", str(run)],
        capture_output=True,
        text=True,
        env=clean_env(LOOPTAP_CACHE_DIR=str(cache)),
    )
    return r.returncode, r.stderr


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = write_huge(tmp_path_factory.mktemp("cache-mode") / "run.jsonl", 40, words=5000)
    assert path.stat().st_size >= keep.__globals__["MIN_BYTES"]  # (1.13 MiB: its analysis kept)
    return path


def test_a_cache_directory_others_may_enter_is_made_private(big_run: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(cache, 0o777)
    code, err = _show(big_run, cache)
    assert code == 0
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    (line,) = err.strip().splitlines()
    assert str(cache) in line and "0777" in line and "made 0700" in line, err
    assert [p.suffix for p in cache.iterdir()] == [".sqlite"]  # and the analysis was kept
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in cache.iterdir())
    code, err = _show(big_run, cache)
    assert code == 0 and err == ""  # said once, when it was tightened


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_cache_directory_of_another_user_is_not_used(big_run: Path, tmp_path: Path) -> None:
    cache = tmp_path / "theirs"
    cache.mkdir(mode=0o777)
    os.chmod(cache, 0o777)
    os.chown(cache, 65534, 65534)  # nobody's
    code, err = _show(big_run, cache)
    assert code == 0
    (line,) = err.strip().splitlines()
    assert "belongs to another user" in line and str(cache) in line, err
    assert list(cache.iterdir()) == [] and stat.S_IMODE(cache.stat().st_mode) == 0o777
