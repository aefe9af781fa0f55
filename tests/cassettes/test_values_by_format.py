"""Issue 101, item 2: values by format, everywhere. Each credential below is in its service's
documented format (or the file or command line it is written in) and stands where nothing names
it: a JSON value under a neutral key, the second item of a list, a ``text/plain`` log line, a
multipart part, a URL's path, base64 or URL-encoded; a process record's argv. Every one is masked
in the cassette and ``verify`` flags it put back. Before (f29135f5) the cases marked ``new`` reached
the file. What is no credential (ids, hashes, timestamps, ``mkdir -p``, a uid pair) stays."""

from __future__ import annotations

import base64
import json
import secrets
import string
from pathlib import Path
from urllib.parse import quote

import pytest

from looptap.cassettes.recording import Redactor, default_detector
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import read_records
from looptap.cassettes.verify import scan_file
from looptap.cassettes.wire import Exchange

_AN = string.ascii_letters + string.digits
_D = string.digits


def _r(n: int, chars: str = _AN) -> str:
    """``n`` random characters of ``chars``; of letters and digits, one of each kind at least (a
    random value of letters only reads as an identifier, which the text rule rightly keeps)."""
    while True:
        v = "".join(secrets.choice(chars) for _ in range(n))
        kinds = (str.isdigit, str.isupper, str.islower)
        if chars != _AN or all(any(k(c) for c in v) for k in kinds):
            return v


def _hex(n: int) -> str:
    return _r(n, "0123456789abcdef")


PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(_r(64, _AN + "+/") for _ in range(3)) + "\n"
#: (name, the secret, the text it is written in)
CASES: list[tuple[str, str, str]] = [
        ("airtable pat in a log line", s := f"pat{_r(14)}.{_hex(64)}", f"INFO using {s}\n"),
        ("mailgun key in text/plain", s := f"key-{_hex(32)}", f"auth failed for {s}"),
        ("notion ntn_ under a neutral key", s := f"ntn_{_r(46)}", json.dumps({"value": s})),
        ("notion secret_ under a neutral key", s := f"secret_{_r(43)}", json.dumps({"v": s})),
        (
            "discord token as a list's second item",
            s := f"MT{_r(24)}.{_r(6)}.{_r(38)}",
            json.dumps(["SG." + _r(22) + "." + _r(43), s]),
        ),
        ("telegram token in a URL path", s := f"{_r(10, '0123456789')}:AA{_r(33)}",
         f"https://api.telegram.org/bot{s}/getMe"),
        ("password in base64 JSON", s := _r(14),
         json.dumps({"blob": base64.b64encode(json.dumps({"password": s}).encode()).decode()})),
        ("api key in a URL-encoded payload", s := "ghp_" + _r(36),
         "state=" + quote(json.dumps({"token": s}), safe="")),
        ("PEM key without its END line", PEM.split("\n")[1], PEM),
        (".netrc password", s := _r(16), f"machine api.example.com\n  login bob\n  password {s}\n"),
        (".pgpass line", s := _r(16), f"db.internal:5432:shop:app:{s}\n"),
        ("mysql -p inside sh -c", s := _r(14), f"sh -c 'mysql -u root -p{s} shop'"),
        ("--token VALUE", s := _r(20), f"gh auth login --token {s}"),
        ("PGPASSWORD=value", s := _r(14), f"PGPASSWORD={s} psql -h db"),
        ("linear key", s := f"lin_api_{_r(40)}", json.dumps({"data": [1, s]})),
        ("doppler token", s := f"dp.st.prd.{_r(43)}", f"DOPPLER={s}"),
        ("asana token in a log line", s := f"2/{_r(16, _D)}/{_r(16, _D)}:{_hex(32)}",
         f"asana: using {s} for the sync"),
        ("discord token in text", s := f"MT{_r(24)}.{_r(6)}.{_r(38)}", f"bot token {s} ok"),
        (".pgpass line escaped in JSON", s := _r(16),
         json.dumps({"out": f"# ~/.pgpass\n*:*:*:postgres:{s}\n"})),
]  # fmt: skip
#: Process records: (name, secret, argv).
ARGV: list[tuple[str, str, list[str]]] = [
    ("curl -u user:pass", s := _r(14), ["curl", "-u", f"bob:{s}", "https://x.example"]),
    ("mysql -p in sh -c", s := _r(14), ["sh", "-c", f"mysql -u root -p{s} db"]),
    ("--password VALUE", s := _r(14), ["psql", "--password", s]),
    ("--token VALUE", s := _r(20), ["gh", "auth", "login", "--token", s]),
    ("Authorization in -H", s := _r(30), ["curl", "-H", f"Authorization: Bearer {s}", "x"]),
]
#: Texts with no credential, kept as they are.
KEPT = [
    "mkdir -p build/out && docker run -u 1000:1000 img",
    "2025-01-01T00:00:00.1Z2025-01-01T00:00:00.2Z",
    "commit 3f2a9c1e0b7d4a5f8e6c2b1a0d9f8e7c6b5a4d3e sha256:" + "ab" * 32,
    "chatcmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012345 call_AbCdEfGhIjKlMnOpQrSt",
    "https://auth.example.com:8443/v1/users/42?page=2",
    "data:image/png;base64," + base64.b64encode(bytes(range(256)) * 8).decode(),
    json.dumps({"signature": base64.b64encode(secrets.token_bytes(96)).decode()}),
    "file.py:12:5:E501:line too long",
]


def _record(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        ex = Exchange("POST", "http://127.0.0.1:9/v1/log", [("content-type", "text/plain")],
                      body.encode(), status=200, tool=True)  # fmt: skip
        ex.response_headers = [("content-type", "application/json")]
        ex.response_chunks = [(None, json.dumps({"echo": body}).encode())]
        w.append(ex)
    return path


@pytest.mark.parametrize(("name", "secret", "text"), CASES, ids=[c[0] for c in CASES])
def test_a_value_by_format_never_reaches_the_file(
    tmp_path: Path, name: str, secret: str, text: str
) -> None:
    path = _record(tmp_path, text)
    assert secret not in path.read_text() and secret[:12] not in path.read_text()
    assert scan_file(path) == []  # what is masked is no find (``-p[REDACTED]``)
    # verify flags it put back: the request body as it was sent
    rec = json.loads(path.read_text().splitlines()[1])
    rec["request"]["body"] = {"text": text}
    planted = tmp_path / "planted.jsonl"
    planted.write_text(path.read_text().splitlines()[0] + "\n" + json.dumps(rec) + "\n")
    assert scan_file(planted), name


@pytest.mark.parametrize(("name", "secret", "argv"), ARGV, ids=[a[0] for a in ARGV])
def test_a_process_records_argv_is_read_as_its_command_line(
    tmp_path: Path, name: str, secret: str, argv: list[str]
) -> None:
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        w.append_side({"type": "process", "pid": 7, "argv": argv, "exit": 0})
    text = path.read_text()
    assert secret not in text, text
    got = read_records(path)
    assert got.problems == [] and scan_file(path) == []
    rec = json.loads(text.splitlines()[1])
    assert len(rec["argv"]) == len(argv) and rec["argv"][0] == argv[0]
    rec["argv"] = argv
    planted = tmp_path / "planted.jsonl"
    planted.write_text(text.splitlines()[0] + "\n" + json.dumps(rec) + "\n")
    assert scan_file(planted), name


def test_a_rule_no_keyword_gates_runs_after_a_pre_check_it_implies() -> None:
    """Issue 101 (session 50), item 3: a rule that no keyword gates (or only a one-character one,
    which most text holds) ran its regex on every text: Discord's and ``.pgpass``'s cost the
    redaction a third more CPU on the corpus. Each declares a cheap pre-check, and every match of
    its regex holds a match of that pre-check (so recall is unchanged: every case above is still
    masked, test_a_value_by_format_never_reaches_the_file)."""
    rules = [
        r for r in default_detector().rules
        if type(r).__name__ in ("Rule", "LineRule") and r.id != "configured pattern"
        and all(len(k) <= 1 for k in r.keywords)
    ]  # fmt: skip
    assert {"discord bot token", ".pgpass line", "asana token"} <= {r.id for r in rules}
    assert all(r.pre is not None for r in rules), [r.id for r in rules if r.pre is None]
    found = 0
    for _, _, text in CASES:
        for r in rules:
            for m in r.pattern.finditer(text):
                found += 1
                assert r.pre.search(m.group(0)), (r.id, m.group(0))
    assert found >= 4


def test_base64_tokens_are_found_from_runs_as_the_token_regex_finds_them() -> None:
    """Issue 101 (session 50), item 3: the base64 tokens the encoded reading decodes are found
    from maximal runs (twice as fast as the regex's lookbehind) and are exactly its matches."""
    from looptap.cassettes.recording import B64_TOKEN
    from looptap.cassettes.recording._detector import b64_tokens

    a = "A" * 20
    texts = [a, a + "=", a + "==", a + "===", a + "=B", a + "==B", "x " + "A" * 2048 + " y",
             "A" * 2049, "-" + a + "Q.", "=" + a + "B", "A" * 19, "aa " + "B" * 30 + "= c",
             a + '="', *(t for _, _, t in CASES), *KEPT]  # fmt: skip
    for t in texts:
        assert list(b64_tokens(t)) == [m.span() for m in B64_TOKEN.finditer(t)], t[:80]


@pytest.mark.parametrize("text", KEPT)
def test_what_is_no_credential_is_kept(text: str) -> None:
    r = Redactor()
    assert r.scrub(text) == text
    assert r.scrub_words(text.split(" ")) == text.split(" ")


def test_a_plain_write_is_refused_by_the_cassette_file(tmp_path: Path) -> None:
    """The one gate: the cassette's writer takes only what the redactor passed."""
    from looptap.cassettes.storage import CassetteFile

    with CassetteFile(tmp_path / "run.jsonl") as f, pytest.raises(TypeError, match="Redacted"):
        f.append(b'{"type": "note"}\n')
    with CassetteFile(tmp_path / "run.jsonl") as f:
        f.append(Redactor().seal(b'{"type": "note", "note": "x"}\n'))
    assert '"note": "x"' in (tmp_path / "run.jsonl").read_text()


def test_verify_reads_every_file_looptap_writes_as_the_redactor_does(tmp_path: Path) -> None:
    """Issue 101, item 3: ``verify DIR`` reads the working tree's contents kept beside a run
    (``RUN.jsonl.files/<sha256>``), ``why``'s logs and edits as whole texts (a PEM key spans
    lines), and reports each by class and place. Before (f29135f5) the kept contents were not
    read, and a key without its END line was no find."""
    from looptap.cassettes.verify import _files_under

    kept = tmp_path / "run.jsonl.files"
    kept.mkdir()
    netrc = _r(16)
    (kept / ("ab" * 32)).write_text(f"machine api.example.com\nlogin bob\npassword {netrc}\n")
    (tmp_path / "why").mkdir()
    (tmp_path / "why" / "E-1.0.jsonl.log").write_text("$ cat id_rsa\n" + PEM)
    (tmp_path / "why" / "E-1.edit0.txt").write_text("x" * 10 + f"\nPGPASSWORD={_r(12)}\n")
    files = _files_under(tmp_path)
    assert len(files) == 3, files
    by_file = {Path(f).name: scan_file(f) for f in files}
    assert [f.kind for f in by_file["ab" * 32]] == [".netrc password"]
    assert by_file["ab" * 32][0].line == 3 and netrc not in str(by_file["ab" * 32][0])
    assert "private key" in {f.kind for f in by_file["E-1.0.jsonl.log"]}
    assert by_file["E-1.0.jsonl.log"][0].line == 2
    assert by_file["E-1.edit0.txt"][0].kind == "credential by name"
