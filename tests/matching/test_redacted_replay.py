"""Issue 91, item 1: the matcher ignores exactly what the recorder redacted. Each tool call below
carries a credential where tools put them (a query parameter of every name the recorder masks, a
JSON, form, XML or text body, a header's value echoed in the body); it is recorded through the
recording pipeline, then the same call, sent again live with the credential as the tool sends it,
must be served from the recording (before, 17 of 26 such calls were: the recorder masked more
names than the matcher ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from looptap.cassettes.matching import Matcher
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import Exchange

SECRET = "Zq81nA0pQ3rS5tU7vW9x"
HOST = "http://127.0.0.1:8765"

#: (name, method, url, headers, body)
CALLS: list[tuple[str, str, str, list[tuple[str, str]], bytes]] = [
    *(
        (f"query {q}", "GET", f"{HOST}/v1/items?city=Paris&{q}={SECRET}", [], b"")
        for q in (
            "apikey", "auth", "sig", "code", "password", "secret", "id_token", "X-Amz-Signature",
            "client_secret", "refresh_token", "private_token", "pass", "passwd", "pwd",
            "private_key", "session_token", "jwt", "bearer", "credential", "X-Goog-Signature",
            "oauth_signature", "oauth_token", "apiToken", "auth_token", "secret_key", "accessKey",
            "key", "token", "access_token",
        )
    ),
    ("json password", "POST", f"{HOST}/v1/login", [("content-type", "application/json")],
     b'{"user": "ada", "password": "' + SECRET.encode() + b'"}'),
    ("json nested token", "POST", f"{HOST}/v1/x", [("content-type", "application/json")],
     b'{"auth": {"refreshToken": "' + SECRET.encode() + b'"}, "n": 1}'),
    ("form client_secret", "POST", f"{HOST}/oauth/token",
     [("content-type", "application/x-www-form-urlencoded")],
     b"grant_type=client_credentials&client_id=app&client_secret=" + SECRET.encode()),
    ("xml password", "POST", f"{HOST}/soap", [("content-type", "text/xml")],
     b"<Login><User>ada</User><Password>" + SECRET.encode() + b"</Password></Login>"),
    ("text env", "PUT", f"{HOST}/v1/config", [("content-type", "text/plain")],
     b"DEBUG=1\nDATABASE_PASSWORD=" + SECRET.encode() + b"\n"),
    ("url in json", "POST", f"{HOST}/v1/conn", [("content-type", "application/json")],
     b'{"dsn": "postgres://app:' + SECRET.encode() + b'@db:5432/shop"}'),
    ("header echoed", "POST", f"{HOST}/v1/echo",
     [("x-api-key", SECRET), ("content-type", "application/json")],
     b'{"note": "my key is ' + SECRET.encode() + b'"}'),
]  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("redacted-replay") / "run.jsonl"
    with CassetteWriter(path) as w:
        for _name, method, url, headers, body in CALLS:
            ex = Exchange(method, url, list(headers), body, status=200, tool=True)
            ex.response_headers = [("content-type", "application/json")]
            ex.response_chunks = [(None, b'{"ok": true}')]
            w.append(ex)
    return path


def test_no_secret_is_recorded(recorded: Path) -> None:
    assert SECRET not in recorded.read_text()


def test_every_redacted_call_replays(recorded: Path) -> None:
    m = Matcher(read_records(recorded).exchanges, tools=True)
    missed = [
        name
        for name, method, url, headers, body in CALLS
        if not hasattr(m.match_tool(method, url, list(headers), body), "exchange")
    ]
    served = len(CALLS) - len(missed)
    print(f"\n{served}/{len(CALLS)} redacted tool calls served")
    assert not missed, missed


def test_a_changed_credential_free_part_still_misses(recorded: Path) -> None:
    """Ignoring the credentials ignores nothing else: the city is still compared."""
    m = Matcher(read_records(recorded).exchanges, tools=True)
    got = m.match_tool("GET", f"{HOST}/v1/items?city=Lyon&apikey={SECRET}", [], b"")
    assert not hasattr(got, "exchange")
    assert SECRET not in "\n".join(got.lines())


@pytest.mark.parametrize(
    ("url", "headers", "body"),
    [
        (f"{HOST}/v1/items?city=Lyon&client_secret={SECRET}", [], b""),
        (f"{HOST}/v1/items?city=Lyon&X-Goog-Signature={SECRET}", [], b""),
        (f"{HOST}/soap", [("content-type", "text/xml")],
         b"<Login><User>bob</User><Password>" + SECRET.encode() + b"</Password></Login>"),
        (f"{HOST}/v1/config", [("content-type", "text/plain")],
         b"DEBUG=0\nDATABASE_PASSWORD=" + SECRET.encode() + b"\n"),
        (f"{HOST}/v1/conn", [("content-type", "application/json")],
         b'{"dsn": "redis://:' + SECRET.encode() + b'@cache:6379/1"}'),
    ],
)  # fmt: skip
def test_a_miss_report_never_prints_the_credential(
    recorded: Path, url: str, headers: list[tuple[str, str]], body: bytes
) -> None:
    """Issue 91, item 1: what a replay miss prints (stderr, the 400's message, a test's report)
    is redacted by the same rules: a credential of any class the recorder masks is not in it."""
    m = Matcher(read_records(recorded).exchanges, tools=True)
    got = m.match_tool("POST" if body else "GET", url, headers, body)
    assert not hasattr(got, "exchange")
    text = "\n".join(got.lines())
    assert SECRET not in text and SECRET[:8] not in text, text


#: A value the recorder masks by its format only (an OpenAI key's), in a parameter whose name
#: says nothing of a secret.
KEYLIKE = "sk-proj-" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9fG"


def test_only_what_the_recorder_redacts_by_name_is_left_out(tmp_path: Path) -> None:
    """Issue 91, item 1 (the matcher's redaction): the redactor says which query parameters it
    redacts by *name* (``Redactor.query_names``), and the matcher leaves exactly those out. A
    parameter masked by its value's format only (``q=`` holding a key) is compared, redacted
    alike on both sides: the same key replays, another value of ``q`` misses; an ``apikey``
    left empty (the replay run's credential not set) is still served. Before (21bc15ea), the
    matcher inferred it from the redaction token: an empty ``apikey=`` was compared, a miss."""
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        ex = Exchange("GET", f"{HOST}/v1/search?q={KEYLIKE}&apikey={SECRET}", [], b"",
                      status=200, tool=True)  # fmt: skip
        ex.response_chunks = [(None, b'{"ok": true}')]
        w.append(ex)
    assert KEYLIKE not in path.read_text() and SECRET not in path.read_text()
    m = Matcher(read_records(path).exchanges, tools=True)
    other = m.match_tool("GET", f"{HOST}/v1/search?q=weather&apikey={SECRET}", [], b"")
    assert not hasattr(other, "exchange")  # q is compared
    same = m.match_tool("GET", f"{HOST}/v1/search?q={KEYLIKE}&apikey=another-key-1234", [], b"")
    assert hasattr(same, "exchange")  # apikey (by name) is not; q's key redacted alike
    m = Matcher(read_records(path).exchanges, tools=True)
    unset = m.match_tool("GET", f"{HOST}/v1/search?q={KEYLIKE}&apikey=", [], b"")
    assert hasattr(unset, "exchange")  # the replay run's credential not set: still served


def test_a_host_named_like_a_credential_keeps_its_port_and_path(tmp_path: Path) -> None:
    """Issue 101, item 4: a tool call to a host whose first label is a credential's word
    (``auth.example.com:8443``) is matched and reported by its host, port and path. Before
    (f29135f5), the text rule read ``auth.example.com`` as a name given the value
    ``8443/v1/users/42``: replay's view was ``http://auth.example.com:[REDACTED]``, two paths one
    key, and a miss's report lost the path."""
    urls = [
        f"http://{h}:8443/v1/users/{n}" for h in ("auth.example.com", "token.corp") for n in (1, 2)
    ]
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for n, url in enumerate(urls):
            ex = Exchange("GET", url, [], b"", status=200, tool=True)
            ex.response_chunks = [(None, b'{"n": %d}' % n)]
            w.append(ex)
    stored = [ex.url for ex in read_records(path).exchanges]
    assert stored == urls
    m = Matcher(read_records(path).exchanges, tools=True)
    for n, url in enumerate(urls):
        got = m.match_tool("GET", url, [], b"")
        assert hasattr(got, "exchange"), "\n".join(got.lines())
        assert got.exchange.response_body == b'{"n": %d}' % n
    miss = m.match_tool("GET", "http://auth.example.com:8443/v1/users/3", [], b"")
    assert not hasattr(miss, "exchange")
    assert "auth.example.com:8443/v1/users/3" in "\n".join(miss.lines())
