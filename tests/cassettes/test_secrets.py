"""No secret reaches a cassette file, whatever the provider and wherever the secret sits.

Every exchange here is a real recording of one provider family, re-dressed the way a live agent
would send it: a unique random sentinel in every credential header, every credential query
parameter, the cookies, a JSON ``api_key`` field, echoed in a message text, in a 401 error body and
inside a streamed chunk (cut in two by a chunk boundary). After ``CassetteWriter`` the raw file is
searched for every sentinel: verbatim, URL-encoded, inside base64-stored chunks, and for any
12-character piece of its random part (a half-redacted key is a leak too). Then the cassette must
load with everything that is not a secret intact: hosts, model names, message text around the
secret, rate-limit headers, stream framing.
"""

from __future__ import annotations

import base64
import re
import secrets
import string
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

import orjson
import pytest
from real_corpus import corpus_exchanges

from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.recording import REDACTED, Redactor
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import Exchange, parse_aws_eventstream

_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "-_"


def _rand(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


@dataclass
class Secret:
    """One sentinel: the full value and its random core (what must never appear, even in part)."""

    value: str
    core: str
    where: str

    def forms(self) -> set[str]:
        return {self.value, quote(self.value, safe=""), quote_plus(self.value)}

    def pieces(self) -> Iterator[str]:
        for i in range(0, max(1, len(self.core) - 11)):
            yield self.core[i : i + 12]


@dataclass
class Vault:
    """Mints sentinels in realistic formats and remembers all of them."""

    all: list[Secret] = field(default_factory=list)

    def _add(self, value: str, core: str, where: str) -> str:
        assert len(core) >= 16
        self.all.append(Secret(value, core, where))
        return value

    def generic(self, where: str) -> str:
        core = secrets.token_hex(16)
        return self._add(f"SENTINEL-{core}", core, where)

    def openai(self, where: str) -> str:
        core = f"{_rand(_URLSAFE, 40)}T3BlbkFJ{_rand(_ALNUM, 20)}"
        return self._add(f"sk-proj-{core}", core, where)

    def anthropic(self, where: str) -> str:
        core = _rand(_URLSAFE, 93)
        return self._add(f"sk-ant-api03-{core}AA", core, where)

    def google_key(self, where: str) -> str:
        core = _rand(_URLSAFE, 35)
        return self._add(f"AIza{core}", core, where)

    def google_oauth(self, where: str) -> str:
        core = _rand(_URLSAFE + ".", 150)
        return self._add(f"ya29.a0{core}", core, where)

    def aws_key_id(self, where: str) -> str:
        core = _rand(string.ascii_uppercase + string.digits, 16)
        return self._add(f"AKIA{core}", core, where)

    def aws_session_token(self, where: str) -> str:
        # base64 with '/', '+' and '=' padding: exercises URL-encoding.
        core = base64.b64encode(secrets.token_bytes(120)).decode()
        return self._add(f"IQoJb3JpZ2luX2VjE{core}", core, where)

    def hex_signature(self, where: str) -> str:
        core = secrets.token_hex(32)
        return self._add(core, core, where)

    def basic(self, where: str) -> str:
        raw = f"proxyuser:{self.generic(where + ' (password)')}"
        encoded = base64.b64encode(raw.encode()).decode()
        return self._add(encoded, encoded[12:], where)


# -- exchanges of every family, from the corpus ---------------------------------------------------


def _corpus_pick(pattern: str, want: Callable[[Exchange], bool]) -> Exchange:
    for _, _, ex in corpus_exchanges(pattern):
        if want(ex):
            return ex
    pytest.skip(f"no corpus exchange matches {pattern}")


def _stream_of(
    host: str, suffix: str, ctype: str = "text/event-stream", needs: bytes = b""
) -> Callable[[Exchange], bool]:
    def want(ex: Exchange) -> bool:
        url = urlsplit(ex.url)
        return (
            url.hostname == host
            and needs in ex.response_body
            and url.path.endswith(suffix)
            and ex.status == 200
            and ctype in (ex.response_header("content-type") or "")
            and isinstance(ex.request_json(), dict)
        )

    return want


def _ollama_native() -> Exchange:
    """Ollama's native /api/chat NDJSON stream (the corpus only has its OpenAI-compatible route)."""
    lines = [
        {
            "model": "llama3.2",
            "created_at": "2025-01-01T00:00:00.1Z",
            "message": {"role": "assistant", "content": "The"},
            "done": False,
        },
        {
            "model": "llama3.2",
            "created_at": "2025-01-01T00:00:00.2Z",
            "message": {"role": "assistant", "content": " capital is Paris."},
            "done": False,
        },
        {
            "model": "llama3.2",
            "created_at": "2025-01-01T00:00:00.3Z",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "total_duration": 123456789,
            "prompt_eval_count": 26,
            "eval_count": 8,
        },
    ]
    body = {
        "model": "llama3.2",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
    }
    return Exchange(
        method="POST",
        url="http://localhost:11434/api/chat",
        request_headers=[("content-type", "application/json"), ("host", "localhost:11434")],
        request_body=orjson.dumps(body),
        status=200,
        response_headers=[("content-type", "application/x-ndjson")],
        response_chunks=[(None, b"".join(orjson.dumps(x) + b"\n" for x in lines))],
    )


FAMILIES: dict[str, Callable[[], Exchange]] = {
    "openai_chat": lambda: _corpus_pick(
        "pydantic-ai/tests/models/cassettes/test_openai/*.yaml",
        _stream_of("api.openai.com", "/chat/completions"),
    ),
    "openai_responses": lambda: _corpus_pick(
        "pydantic-ai/tests/models/cassettes/test_openai_responses/*.yaml",
        _stream_of("api.openai.com", "/responses"),
    ),
    "anthropic": lambda: _corpus_pick(
        "llm-anthropic/tests/cassettes/test_anthropic/*.yaml",
        _stream_of("api.anthropic.com", "/messages"),
    ),
    "gemini_ai_studio": lambda: _corpus_pick(
        "pydantic-ai/tests/models/cassettes/test_google/*.yaml",
        _stream_of("generativelanguage.googleapis.com", ":streamGenerateContent"),
    ),
    "vertex": lambda: _corpus_pick(
        "pydantic-ai/tests/models/cassettes/test_google/*.yaml",
        _stream_of("aiplatform.googleapis.com", ":streamGenerateContent"),
    ),
    "ollama": _ollama_native,
    "bedrock": lambda: _corpus_pick(
        "pydantic-ai/tests/models/cassettes/test_bedrock/*.yaml",
        _stream_of(
            "bedrock-runtime.us-east-1.amazonaws.com",
            "/converse-stream",
            "amazon.eventstream",
            b'"delta":{"text":"',
        ),
    ),
}


# -- AWS event-stream re-encoding (to put a secret inside a Bedrock frame) -------------------------


def _aws_frame(headers: dict[str, Any], payload: bytes) -> bytes:
    hb = b"".join(
        bytes([len(k)])
        + k.encode()
        + b"\x07"
        + struct.pack(">H", len(str(v).encode()))
        + str(v).encode()
        for k, v in headers.items()
    )
    prelude = struct.pack(">II", 16 + len(hb) + len(payload), len(hb))
    msg = prelude + struct.pack(">I", zlib.crc32(prelude)) + hb + payload
    return msg + struct.pack(">I", zlib.crc32(msg))


def test_aws_frame_encoder_reproduces_a_real_bedrock_stream() -> None:
    ex = FAMILIES["bedrock"]()
    framed = parse_aws_eventstream(ex.response_chunks)
    assert framed.events and not framed.notes
    assert (
        b"".join(_aws_frame(e.headers or {}, e.data.encode()) for e in framed.events)
        == ex.response_body
    )


# -- dressing an exchange with secrets -----------------------------------------------------------

_TEXT_FIELD = re.compile(rb'"(text|content|delta)": ?"')


@dataclass
class Dressed:
    family: str
    exchange: Exchange
    #: What the request body must be after redaction (the secrets replaced, nothing else changed).
    expected_request: Any
    expected_body: bytes
    secrets: list[Secret]


def _first_text(
    value: Any, history_keys: tuple[str, ...] = ("messages", "input", "contents")
) -> list[Any] | None:
    """A path to the first message text string of a request body."""

    def walk(v: Any, path: list[Any]) -> list[Any] | None:
        if isinstance(v, dict):
            for k, item in v.items():
                if k in ("text", "content") and isinstance(item, str) and item:
                    return [*path, k]
                found = walk(item, [*path, k])
                if found:
                    return found
        elif isinstance(v, list):
            for i, item in enumerate(v):
                found = walk(item, [*path, i])
                if found:
                    return found
        return None

    for key in history_keys:
        if key in value:
            if isinstance(value[key], str):
                return [key]
            found = walk(value[key], [key])
            if found:
                return found
    return None


def _get(value: Any, path: list[Any]) -> Any:
    for p in path:
        value = value[p]
    return value


def _set(value: Any, path: list[Any], new: Any) -> None:
    for p in path[:-1]:
        value = value[p]
    value[path[-1]] = new


def _chunked(body: bytes, cut_inside: bytes, sep: bytes) -> list[tuple[float | None, bytes]]:
    """Chunks at event boundaries, plus one boundary in the middle of ``cut_inside``."""
    at = body.index(cut_inside) + len(cut_inside) // 2
    cuts = {at}
    if sep:
        i = body.find(sep)
        while i >= 0:
            cuts.add(i + len(sep))
            i = body.find(sep, i + 1)
    else:
        cuts.update(range(0, len(body), 97))
    points = sorted(c for c in cuts if 0 < c < len(body))
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    return [(round(0.05 * i, 3), p) for i, p in enumerate(pieces)]


def dress(family: str, base: Exchange, vault: Vault) -> Dressed:
    start = len(vault.all)
    if family in ("openai_chat", "openai_responses"):
        auth_key = vault.openai("authorization")
        auth = f"Bearer {auth_key}"
    elif family == "vertex":
        auth_key = vault.google_oauth("authorization")
        auth = f"Bearer {auth_key}"
    elif family == "bedrock":
        auth_key = vault.aws_key_id("sigv4 credential")
        auth = (
            f"AWS4-HMAC-SHA256 Credential={auth_key}/20250101/us-east-1/bedrock/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, "
            f"Signature={vault.hex_signature('sigv4 signature')}"
        )
    else:
        auth_key = vault.generic("authorization")
        auth = f"Bearer {auth_key}"
    x_api_key = (
        vault.anthropic("x-api-key") if family == "anthropic" else vault.generic("x-api-key")
    )
    session_token = vault.aws_session_token("x-amz-security-token")
    cookie = (
        f"__cf_bm={vault.generic('cookie __cf_bm')}; _cfuvid={vault.generic('cookie _cfuvid')}"
        "-1775384635.7-1.0.1.1"
    )
    request_headers = [
        *base.request_headers,
        ("Authorization", auth),
        ("x-api-key", x_api_key),
        ("api-key", vault.generic("api-key")),
        ("x-goog-api-key", vault.google_key("x-goog-api-key")),
        ("Cookie", cookie),
        ("Proxy-Authorization", f"Basic {vault.basic('proxy-authorization')}"),
        ("X-Amz-Security-Token", session_token),
        ("X-Amz-Date", "20250101T000000Z"),
    ]
    query = {
        "key": vault.google_key("?key="),
        "api-key": vault.generic("?api-key="),
        "token": vault.generic("?token="),
        "access_token": vault.google_oauth("?access_token="),
        "X-Amz-Security-Token": session_token,
    }
    url = (
        base.url
        + ("&" if "?" in base.url else "?")
        + "&".join(f"{k}={quote(v, safe='')}" for k, v in query.items())
    )

    # Request body: a JSON api_key field, the header key echoed in the user's text, and keys in
    # every realistic format that appear nowhere else (only the pattern net can catch those).
    body = orjson.loads(base.request_body)
    expected = orjson.loads(base.request_body)
    path = _first_text(body)
    assert path is not None, family
    text = _get(body, path)
    strays = [
        vault.openai("text (pattern only)"),
        vault.anthropic("text (pattern only)"),
        vault.google_key("text (pattern only)"),
    ]
    strays += [vault.google_oauth("text (pattern only)"), vault.aws_key_id("text (pattern only)")]
    echo = f" -- my key is {auth_key}, the other is {x_api_key}; also try " + " ".join(strays)
    _set(body, path, text + echo)
    redacted_echo = echo
    for secret in (auth_key, x_api_key, *strays):
        redacted_echo = redacted_echo.replace(secret, REDACTED)
    _set(expected, path, text + redacted_echo)
    body["api_key"] = vault.generic("body api_key")
    expected["api_key"] = REDACTED

    # Response: the key echoed inside a streamed event, split by a chunk boundary.
    stream_key = auth_key
    raw = base.response_body
    if family == "bedrock":
        events = parse_aws_eventstream([(None, raw)]).events
        frames = []
        done = False
        for ev in events:
            data = ev.data.encode()
            if not done and b'"text":"' in data:
                data = data.replace(b'"text":"', b'"text":"' + stream_key.encode() + b" ", 1)
                done = True
            frames.append(_aws_frame(ev.headers or {}, data))
        assert done
        new_body = b"".join(frames)
        chunks = _chunked(new_body, stream_key.encode(), b"")
    else:
        m = next(m for m in _TEXT_FIELD.finditer(raw) if m.start() > 0)
        new_body = raw[: m.end()] + stream_key.encode() + b" " + raw[m.end() :]
        chunks = _chunked(new_body, stream_key.encode(), b"\n" if family == "ollama" else b"\n\n")
    if family == "bedrock":
        # Length-prefixed frames: the frame that held the secret is rebuilt around the masked
        # payload (its lengths and checksums recomputed), so the stream still parses frame for
        # frame.
        expected_body = b"".join(
            _aws_frame(
                ev.headers or {}, ev.data.encode().replace(stream_key.encode(), REDACTED.encode())
            )
            for ev in parse_aws_eventstream([(None, new_body)]).events
        )
    else:
        expected_body = new_body.replace(stream_key.encode(), REDACTED.encode())

    set_cookie = (
        f"_cfuvid={vault.generic('set-cookie')}-1775384635.723881-1.0.1.1; HttpOnly; "
        f"SameSite=None; Secure; Path=/; Domain={urlsplit(base.url).hostname}"
    )
    response_headers = [
        *base.response_headers,
        ("set-cookie", set_cookie),
        ("x-ratelimit-remaining-tokens", "149984"),
        ("x-ratelimit-limit-tokens", "150000"),
    ]
    ex = replace(
        base,
        url=url,
        request_headers=request_headers,
        request_body=orjson.dumps(body),
        response_headers=response_headers,
        response_chunks=chunks,
        notes=list(base.notes),
    )
    ex.forget_request_json()
    return Dressed(family, ex, expected, expected_body, vault.all[start:])


def error_exchange(family: str, dressed: Dressed, vault: Vault) -> tuple[Exchange, bytes]:
    """The same request answered 401 with the key echoed in the error, as OpenAI does."""
    key = next(s.value for s in dressed.secrets if s.where in ("authorization", "sigv4 credential"))
    body = {
        "error": {
            "message": f"Incorrect API key provided: {key}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    raw = orjson.dumps(body, option=orjson.OPT_INDENT_2)
    ex = replace(
        dressed.exchange,
        status=401,
        response_headers=[
            ("content-type", "application/json"),
            ("www-authenticate", 'Bearer realm="OpenAI API"'),
        ],
        response_chunks=[(0.2, raw)],
    )
    ex.forget_request_json()
    return ex, raw.replace(key.encode(), REDACTED.encode())


# -- checks ----------------------------------------------------------------------------------


def _b64_blobs(value: Any) -> Iterator[bytes]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "b64" and isinstance(v, str):
                yield base64.b64decode(v)
            else:
                yield from _b64_blobs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _b64_blobs(v)


def assert_no_leak(path: Path, vault: Vault) -> None:
    raw = path.read_bytes()
    haystacks = [raw]
    for line in raw.splitlines():
        haystacks.extend(_b64_blobs(orjson.loads(line)))
    assert len(haystacks) >= 1
    leaks = []
    for s in vault.all:
        for hay in haystacks:
            for form in s.forms():
                if form.encode() in hay:
                    leaks.append(f"{s.where}: {form[:24]}…")
            for piece in s.pieces():
                if piece.encode() in hay:
                    leaks.append(f"{s.where}: a piece of it ({piece})")
                    break
    assert not leaks, "secrets in the cassette file:\n" + "\n".join(sorted(set(leaks)))


def _query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))


@pytest.fixture(scope="module")
def bases() -> dict[str, Exchange]:
    return {family: make() for family, make in FAMILIES.items()}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_no_secret_reaches_the_file(
    family: str, bases: dict[str, Exchange], tmp_path: Path
) -> None:
    vault = Vault()
    base = bases[family]
    dressed = dress(family, base, vault)
    err, err_expected = error_exchange(family, dressed, vault)
    before = parse_exchange(base)
    out = tmp_path / "secrets.jsonl"
    with CassetteWriter(out, meta={"agent": "test"}) as w:
        w.append(dressed.exchange)
        w.append(err)
    assert len(vault.all) >= 20
    assert_no_leak(out, vault)

    cas = read_records(out)
    assert cas.problems == []
    got, got_err = cas.exchanges
    # Nothing that is not a secret was touched.
    url, base_url = urlsplit(got.url), urlsplit(base.url)
    assert (url.scheme, url.netloc, url.path) == (base_url.scheme, base_url.netloc, base_url.path)
    q = _query(got.url)
    for k, v in _query(base.url).items():
        assert q[k] == v  # e.g. alt=sse
    assert {q[k] for k in ("key", "api-key", "token", "access_token", "X-Amz-Security-Token")} == {
        "REDACTED"
    }
    assert got.request_json() == dressed.expected_request
    assert got.response_body == dressed.expected_body
    # masked in place (the key may straddle chunks; a Bedrock frame is rebuilt around it)
    assert [c for _, c in got.response_chunks if REDACTED.encode() in c], (
        "the stream still shows where the key was"
    )
    headers = dict((k.lower(), v) for k, v in got.request_headers)
    assert headers["x-amz-date"] == "20250101T000000Z"
    for name in (
        "authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
        "proxy-authorization",
        "x-amz-security-token",
    ):
        assert REDACTED in headers[name], name
    for k, v in base.request_headers:
        assert (k, v) in got.request_headers
    resp_headers = got.response_headers
    assert ("x-ratelimit-remaining-tokens", "149984") in resp_headers
    assert ("x-ratelimit-limit-tokens", "150000") in resp_headers
    assert ("set-cookie", REDACTED) in resp_headers
    for k, v in base.response_headers:
        if k.lower() != "set-cookie":
            assert (k, v) in resp_headers
    assert got_err.status == 401 and orjson.loads(got_err.response_body) == orjson.loads(
        err_expected
    )
    # The derived view agrees with the raw: same family, same model.
    after = parse_exchange(got)
    assert after.family == before.family
    if before.request is not None:
        assert after.request is not None and after.request.model == before.request.model
    if family != "bedrock":
        # A text stream keeps its framing and its terminal event around the redaction.
        assert after.response is not None and before.response is not None
        assert after.response.complete == before.response.complete
        assert after.analysis_errors == before.analysis_errors
    assert parse_exchange(got_err).response.error is not None  # type: ignore[union-attr]


def test_one_redactor_for_a_whole_run_keeps_hosts_and_words(
    bases: dict[str, Exchange], tmp_path: Path
) -> None:
    """A writer's redactor lives for the whole cassette: what it learns must be secrets only.

    Regression: cookie attributes (``Domain=api.anthropic.com``, ``HttpOnly``) and SigV4 field
    names (``SignedHeaders=content-type;host``) were learned as secrets, so every later URL lost
    its host and ordinary words vanished from later bodies.
    """
    vault = Vault()
    dressed = [dress(family, base, vault) for family, base in bases.items()]
    words = (
        "Set the content-type header and x-amz-date; the cookie is HttpOnly with SameSite=None on "
        "Domain=api.anthropic.com; Credential and Signature are fields."
    )
    plain = [
        replace(
            d.exchange,
            request_body=d.exchange.request_body.replace(
                b"-- my key is", words.encode() + b" -- my key is", 1
            ),
        )
        for d in dressed
    ]
    for p in plain:
        p.forget_request_json()
    out = tmp_path / "run.jsonl"
    with CassetteWriter(out) as w:
        for _ in range(2):
            for ex in plain:
                w.append(ex)
    assert_no_leak(out, vault)
    cas = read_records(out)
    assert cas.problems == [] and len(cas.exchanges) == 2 * len(plain)
    for got, sent in zip(cas.exchanges, plain + plain, strict=True):
        assert urlsplit(got.url).netloc == urlsplit(sent.url).netloc
        assert urlsplit(got.url).path == urlsplit(sent.url).path
        assert words in got.request_body.decode()
        assert orjson.loads(got.request_body).get("model") == orjson.loads(sent.request_body).get(
            "model"
        )


def test_real_anthropic_cookies_do_not_erase_the_host(tmp_path: Path) -> None:
    """The real llm-anthropic recordings carry ``set-cookie: …; Domain=api.anthropic.com``."""
    exchanges = [
        ex
        for _, _, ex in corpus_exchanges(
            "llm-anthropic/tests/cassettes/test_anthropic/test_tools.yaml"
        )
    ]
    if len(exchanges) < 2:
        pytest.skip("corpus file missing")
    assert any(
        "Domain=api.anthropic.com" in v
        for k, v in exchanges[0].response_headers
        if k.lower() == "set-cookie"
    )
    out = tmp_path / "run.jsonl"
    with CassetteWriter(out) as w:
        for ex in exchanges:
            w.append(ex)
    cas = read_records(out)
    assert [ex.url for ex in cas.exchanges] == [ex.url for ex in exchanges]
    raw = out.read_bytes()
    for ex in exchanges:
        for k, v in ex.response_headers:
            if k.lower() == "set-cookie":
                value = v.split(";")[0].split("=", 1)[1]
                assert value.encode() not in raw


def test_secret_split_across_stream_chunks() -> None:
    """Chunks follow socket reads: a learned key or a patterned key can straddle two or three."""
    vault = Vault()
    learned = vault.generic("authorization")
    patterned = vault.openai("stream (pattern only)")
    body = f'data: {{"delta":"{learned} and {patterned}"}}\n\n'.encode()
    a, b = body.index(learned.encode()), body.index(patterned.encode())
    cuts = [a + 3, a + 9, a + 20, b + 5]
    pieces = [body[i:j] for i, j in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    ex = Exchange(
        "POST",
        "https://api.openai.com/v1/chat/completions",
        request_headers=[("authorization", f"Bearer {learned}")],
        request_body=b'{"model":"gpt-4o","stream":true,"messages":[]}',
        status=200,
        response_headers=[("content-type", "text/event-stream")],
        response_chunks=[(0.1 * i, p) for i, p in enumerate(pieces)],
    )
    out = Redactor().exchange(ex)
    assert len(out.response_chunks) == len(pieces)
    assert [t for t, _ in out.response_chunks] == [t for t, _ in ex.response_chunks]
    assert out.response_body == f'data: {{"delta":"{REDACTED} and {REDACTED}"}}\n\n'.encode()
    assert out.response_chunks[0][1].endswith(REDACTED.encode())


def test_secret_in_a_non_utf8_chunk_stored_as_base64(tmp_path: Path) -> None:
    vault = Vault()
    key = vault.generic("authorization")
    stray = vault.anthropic("binary chunk (pattern only)")
    chunk = b"\xff\xfe data: " + key.encode() + b" " + stray.encode() + b" \x80\n\n"
    ex = Exchange(
        "POST",
        "https://api.anthropic.com/v1/messages",
        request_headers=[("x-api-key", key)],
        request_body=b'{"model":"claude","stream":true,"messages":[]}',
        status=200,
        response_chunks=[(0.1, chunk), (0.2, b"\xc3")],
    )
    out = tmp_path / "b.jsonl"
    with CassetteWriter(out) as w:
        w.append(ex)
    assert b'"b64"' in out.read_bytes()
    assert_no_leak(out, vault)
    got = read_records(out).exchanges[0]
    assert got.response_chunks == [
        (0.1, b"\xff\xfe data: [REDACTED] [REDACTED] \x80\n\n"),
        (0.2, b"\xc3"),
    ]


def test_redaction_inside_a_bedrock_frame_keeps_the_stream_readable(
    bases: dict[str, Exchange],
) -> None:
    """Bedrock frames are length-prefixed and CRC-checked. Replacing a secret inside a payload by a
    shorter token shifts every later frame: the derived view loses the rest of the stream. A
    same-length mask (or re-framing) would keep it readable."""
    vault = Vault()
    dressed = dress("bedrock", bases["bedrock"], vault)
    before = parse_exchange(dressed.exchange)
    after = parse_exchange(Redactor().exchange(dressed.exchange))
    assert before.complete is True
    assert after.complete is True and not after.notes


def _chat(body: dict[str, Any], auth: str = "Bearer sk-none") -> Exchange:
    return Exchange(
        method="POST",
        url="https://api.openai.com/v1/chat/completions",
        request_headers=[("authorization", auth), ("content-type", "application/json")],
        request_body=orjson.dumps(body),
        started=0.0,
    )


def test_a_text_stored_before_its_secret_was_learned_is_stored_the_same_when_sent_again() -> None:
    """A text is masked as it was the first time the run met it (issue 54), so a history sent
    again reads as the one sent first: masking a value learned since in it alone made it read as
    rewritten (a split conversation, ``C.history_mutated``). A token said in plain words before
    anything named it stays in that text, which is on disk already in the first request; every
    text met once it is learned is masked, and so is the header that taught it."""
    red = Redactor()
    token = "opaque-" + secrets.token_hex(12)  # no known format: only learning can catch it
    history = [{"role": "user", "content": f"the deploy token is {token}, keep it"}]
    first = red.exchange(_chat({"model": "gpt-4o", "messages": history}))
    assert token.encode() in first.request_body  # not known yet: nothing says it is a secret
    later = [*history, {"role": "user", "content": f"now use {token}"}]
    second = red.exchange(_chat({"model": "gpt-4o", "messages": later}, auth=f"Bearer {token}"))
    assert token.encode() not in orjson.dumps(second.request_headers)
    sent = orjson.loads(second.request_body)["messages"]
    assert sent == [history[0], {"role": "user", "content": f"now use {REDACTED}"}]


def test_secret_behind_a_json_escape_is_found() -> None:
    """Strings are scanned decoded: ``\\u0073k-…`` and ``\\nsk-…`` are keys too."""
    key = "sk-proj-" + "".join(secrets.choice(_ALNUM) for _ in range(32))
    raw = (
        b'{"model":"gpt-4o","messages":[{"role":"user","content":"a\\n'
        + key.encode()
        + b'"},{"role":"user","content":"\\u0073'
        + key[1:].encode()
        + b'"}]}'
    )
    ex = replace(_chat({}), request_body=raw)
    out = Redactor().exchange(ex)
    assert key[4:].encode() not in out.request_body
    assert orjson.loads(out.request_body)["messages"][0]["content"] == f"a\n{REDACTED}"


def test_a_pattern_that_crosses_lines_falls_back_to_one_scrub_per_string() -> None:
    red = Redactor(extra_patterns=[r"(?s)BEGIN.*END"])
    body = {
        "messages": [{"content": "x BEGIN secret END y"}, {"content": "BEGIN"}, {"content": "END"}]
    }
    out = orjson.loads(red.exchange(_chat(body)).request_body)
    assert [m["content"] for m in out["messages"]] == [f"x {REDACTED} y", "BEGIN", "END"]


def test_history_scrub_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    red = Redactor()
    # SEEN_CHARS where the JSON redactor reads it: the globals of its class's module
    monkeypatch.setitem(type(red._json).__init__.__globals__, "SEEN_CHARS", 10_000)
    for i in range(50):
        red.exchange(_chat({"messages": [{"content": f"{i:04d} " + "w" * 995}]}))
    assert red._json._memo_chars <= 10_000
    assert sum(len(t) > 900 for t in red._json._memo) <= 10


# -- issue 13 item 4: names, non-string values, URL paths, configuration, the OTLP endpoint --------

CREDENTIAL_NAMES = (
    "token",
    "key",
    "openai_api_key",
    "secret_key",
    "aws_secret_access_key",
    "auth_token",
    "bearer",
    "authorization_token",
    "x-llm-key",
    "openAIApiKey",
    "clientSecret",
    "refresh_token",
    "AWS_SESSION_TOKEN",
    "privateKey",
    "passwd",
    "x-goog-api-key",
    "azureOpenAIKey",
    "hf_token",
)
LOOK_ALIKES = (
    "max_tokens",
    "token_count",
    "keywords",
    "input_tokens",
    "cache_creation_input_tokens",
    "tokenizer",
    "key_points",
    "monkey",
    "author",
    "authorName",
    "session_id",
    "signature",
    "thoughtSignature",
    "tokens",
    "keyword",
    "max_output_tokens",
    "reasoning_tokens",
    "turkey",
)


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_credential_names_are_classified(name: str) -> None:
    from looptap.cassettes.recording import secret_name

    assert secret_name(name) is not None


@pytest.mark.parametrize("name", LOOK_ALIKES)
def test_look_alike_names_are_not(name: str) -> None:
    from looptap.cassettes.recording import secret_name

    assert secret_name(name) is None


def _sentinel() -> str:
    return "Q" + secrets.token_hex(12) + "zK"


def test_values_under_credential_names_whatever_their_type() -> None:
    r = Redactor()
    nested, number, arg = _sentinel(), 12345678901234, _sentinel()
    body = {
        "api_key": number,
        "secret": {"value": nested, "kind": "static"},
        "key": "color",
        "max_tokens": 1024,
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "function": {
                            "name": "login",
                            "arguments": orjson.dumps({"token": arg, "user": "ada"}).decode(),
                        }
                    }
                ],
            }
        ],
        "echo": f"the server said {nested} and {arg}",
    }
    out, changed = r._json.scrub_json(body)
    text = orjson.dumps(out).decode()
    assert changed and out["api_key"] == REDACTED and out["secret"]["kind"] == "static"
    for value in (nested, arg, str(number)):
        assert value not in text
    assert out["key"] == "color" and out["max_tokens"] == 1024 and '\\"user\\":\\"ada\\"' in text


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        (
            "https://api.telegram.org/bot123456:AAH4xYz9Qw8e7r6t5y4u3i2o1pLkJhGfDsA/sendMessage",
            "/sendMessage",
        ),
        (
            "https://gw.example.com/key/Q9f3ltA8b7c6d5e4f3g2h1/v1/chat/completions",
            "/v1/chat/completions",
        ),
        (
            "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&"
            "sig=Abc123DEF456ghi789%2B%3D&se=1",
            "sv=2022-11-02",
        ),
    ],
)
def test_secrets_in_url_paths_and_sas_signatures(url: str, kept: str) -> None:
    out = Redactor().url(url)
    assert kept in out and "REDACTED" in out
    assert not any(p in out for p in ("AAH4xYz9", "Q9f3ltA8", "Abc123DEF"))


def test_a_plain_url_is_left_alone() -> None:
    url = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent"
    assert Redactor().url(url) == url


def test_pyproject_table_adds_headers_body_keys_and_patterns(tmp_path: Path) -> None:
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text(
        '[tool.looptap.redact]\nheaders = ["x-team-ident"]\nbody_keys = ["tenant_blob"]\npatterns '
        '= ["corp-[0-9a-f]{12}"]\n'
    )
    r = Redactor.configured(config=cfg)
    ident, blob, corp = _sentinel(), "plain words here", "corp-" + secrets.token_hex(6)
    ex = Exchange(
        method="POST",
        url="https://api.openai.com/v1/chat/completions",
        request_headers=[("content-type", "application/json"), ("x-team-ident", ident)],
        request_body=orjson.dumps(
            {
                "model": "m",
                "tenant_blob": blob,
                "messages": [{"role": "user", "content": f"id {corp}"}],
            }
        ),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.0, b"{}")],
    )
    out = r.exchange(ex)
    text = repr(out.request_headers) + out.request_body.decode()
    assert ident not in text and blob not in text and corp not in text
    plain = Redactor().exchange(ex)
    assert ident in repr(plain.request_headers)  # the table is what caught it


def test_a_bad_pyproject_table_is_a_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text('[tool.looptap.redact]\nheaders = "x-one"\n')
    with pytest.raises(ValueError, match="headers must be a list"):
        Redactor.configured(config=cfg)
    cfg.write_text('[tool.looptap.redact]\npatterns = ["("]\n')
    with pytest.raises(ValueError, match="invalid redaction pattern"):
        Redactor.configured(config=cfg)


def test_otlp_endpoint_path_goes_before_the_query_and_is_printed_redacted() -> None:
    from looptap.cassettes.interop import traces_url

    url = traces_url(
        "https://user:pw5Qx8Lm2Zt@collector.example.com:4318/otlp?api_key=Q9f3ltA8b7c6d5e4f3g2h1"
    )
    assert url.startswith(
        "https://user:pw5Qx8Lm2Zt@collector.example.com:4318/otlp/v1/traces?api_key="
    )
    assert traces_url("http://c:4318/v1/traces/") == "http://c:4318/v1/traces"
    shown = Redactor().url(url)
    assert "pw5Qx8Lm2Zt" not in shown and "Q9f3ltA8" not in shown and "/otlp/v1/traces?" in shown


def test_a_letters_only_token_under_a_token_key_is_redacted() -> None:
    """About one generated token in a hundred has no digit: under a ``token``/``key`` name it is
    still a credential (it leaked from tool arguments in 1 % of the sentinel runs; now in about
    0.003 %), while words and camelCase / PascalCase names there stay."""
    import secrets as _secrets

    from looptap.cassettes.recording import looks_secret

    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
    found = sum(
        looks_secret("".join(_secrets.choice(alphabet) for _ in range(28))) for _ in range(5000)
    )
    assert found >= 4950, found  # measured: 99.7 % (a random string can look like a camelCase name)
    for name in (
        "getWeatherForecastInParis",
        "TheQuickBrownFoxJumpsOver",
        "supercalifragilisticexpialidocious",
        "color",
    ):
        assert not looks_secret(name), name


@pytest.mark.parametrize(
    ("name", "value", "kept"),
    [
        ("x-amzn-bedrock-input-token-count", "17", True),  # a usage count (InvokeModel)
        ("X-Amzn-Bedrock-Cache-Read-Input-Token-Count", "0", True),
        ("x-ratelimit-remaining-tokens", "149984", True),
        ("anthropic-ratelimit-input-tokens-reset", "2026-11-27T00:00:00Z", True),
        ("x-amzn-bedrock-input-token-count", "tkn_4f9aQ2LmZx81", False),  # not a count: masked
        ("x-auth-token-count", "12", False),  # a credential's word beside the counter's
        ("x-session-token", "4f9aQ2LmZx81Kd7Pq0", False),
        ("x-custom-auth-token", "abc", False),
        ("x-token-counter", "abcdef1234567890", False),  # "counter" is not the count word
    ],
)
def test_token_counters_are_kept_and_tokens_are_not(name: str, value: str, kept: bool) -> None:
    """Issue 69 item 4: InvokeModel's usage headers were masked for the word "token" in their
    names (usage lost, a false A.usage_missing). A counter of tokens is kept when no credential
    word stands beside it and, for a count, its value is a number."""
    (got,) = Redactor().headers([(name, value)])
    assert (got[1] == value) is kept, got
