"""Sentinel secrets where real clients and servers put them, for every provider, through the
recording pipeline (decode → redact → encode → parse → view → write, as the recorder's writer runs
it); then every command that writes a file or a stream. Not one 8-character piece of any sentinel
may reach any of them, and the non-secret look-alikes (``max_tokens``, ``token_count``,
``keywords``, ``{"key": "color"}``, tool-schema property names) must survive.

Run with ``-s`` to see the count table.
"""

from __future__ import annotations

import base64
import gzip
import secrets
import subprocess
import sys
import zlib
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.matching import Matcher
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import Exchange
from tests.support import progress
from tests.support.secret_streams import telling

ROOT = Path(__file__).resolve().parents[2]
SENT: dict[str, str] = {}


def s(loc: str, extra: str = "") -> str:
    """A neutral random sentinel (no known key prefix: only redaction by name or by learned value
    can catch it)."""
    if loc not in SENT:
        # random letters of both cases and digits: no piece of it is a word found elsewhere
        while True:
            value = secrets.token_urlsafe(21).replace("-", "x").replace("_", "y")
            if (
                any(c.isdigit() for c in value)
                and any(c.isupper() for c in value)
                and any(c.islower() for c in value)
            ):
                break
        SENT[loc] = value + extra
    return SENT[loc]


def pasted(kind: str) -> str:
    """A key in a known format, pasted into text (only the pattern net catches it)."""
    if kind not in SENT:
        alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        rnd = "".join(secrets.choice(alnum) for _ in range(40))
        SENT[kind] = {
            "openai": "sk-proj-" + rnd,
            "google": "AIza" + rnd[:35],
            "aws": "AKIA" + rnd.upper()[:16].replace("0", "A"),
        }[kind]
    return SENT[kind]


LOOKALIKES = {
    "max_tokens": 1024,
    "token_count": 17,
    "keywords": ["alpha", "beta"],
    "input_tokens": 3,
    "tokenizer": "cl100k_base",
    "key_points": ["one", "two"],
    "monkey": "business",
    "author": "Ada",
    "session_id": "sess-1234",
    "key": "color",
    "prompt_cache_key": "user-42",
}


def _ex(
    url: str,
    headers: list[tuple[str, str]],
    body: bytes,
    status: int = 200,
    resp: bytes = b'{"ok": true}',
    resp_headers: list[tuple[str, str]] | None = None,
    chunks: list[bytes] | None = None,
) -> Exchange:
    return Exchange(
        "POST", url, headers, body, status, "OK",
        resp_headers or [("content-type", "application/json")],
        [(0.01 * i, c) for i, c in enumerate(chunks or [resp])],
        started=1_700_000_000.0,
        request_encoded=True,  # as captured on the wire, as the proxy's addon marks them
        response_encoded=True,
    )


def exchanges() -> list[Exchange]:
    out: list[Exchange] = []
    slash_key = s("bearer", "/x+y~z")  # echoed by the server as ab\/cd
    chat = {
        "model": "gpt-4o",
        **LOOKALIKES,
        "messages": [
            {
                "role": "user",
                "content": f"my keys: {pasted('openai')} and {pasted('google')}; "
                f"aws {pasted('aws')}",
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {
                            "name": "login",
                            "arguments": orjson.dumps(
                                {
                                    "username": "ada",
                                    "password": s("argpassword"),
                                    "api_key": s("argapikey"),
                                }
                            ).decode(),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "login",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "api_key": {"type": "string", "description": "The API key"},
                            "password": {"type": "string"},
                        },
                    },
                },
            }
        ],
        "token": s("token"),
        "openai_api_key": s("openaiapikey"),
        "secret_key": s("secretkey"),
        "aws_secret_access_key": s("awssecret"),
        "auth_token": s("authtoken"),
        "bearer": s("bodybearer"),
        "apiKey": s("apiKeyCamel"),
        "access_token": s("accesstoken"),
        "refresh_token": s("refreshtoken"),
        "client_secret": s("clientsecret"),
        "password": s("password"),
        "private_key": s("privatekey"),
        "session_token": s("sessiontoken"),
        "webhook_secret": s("webhooksecret"),
        "db_password": s("dbpassword"),
        "credentials": {"user": "ada", "password": s("nestedpassword")},
        "github_token": s("githubtoken"),
        "hf_token": s("hftoken"),
        "auth": {"token": s("authobjtoken")},
        "metadata": {"key": s("metakey")},
    }
    out.append(
        _ex(
            f"https://api.openai.com/v1/chat/completions?api_key={s('queryapikey')}&token="
            f"{s('querytoken')}&access_token={s('queryaccesstoken')}",
            [
                ("content-type", "application/json"),
                ("authorization", f"Bearer {slash_key}"),
                ("cookie", f"a={s('cookie')}"),
                ("x-llm-key", s("xllmkey")),
                ("x-api-token", s("xapitoken")),
                ("x-custom-token", s("xcustomtoken")),
                ("x-portkey-api-key", s("portkey")),
                ("helicone-auth", f"Bearer {s('helicone')}"),
                ("cf-aig-authorization", f"Bearer {s('cfaig')}"),
                (
                    "proxy-authorization",
                    "Basic " + base64.b64encode(f"u:{s('proxybasic')}".encode()).decode(),
                ),
            ],
            orjson.dumps(chat),
            status=401,
            resp=orjson.dumps(
                {
                    "error": {
                        "message": "Incorrect API key provided: " + slash_key.replace("/", "\\/"),
                        "type": "invalid_request_error",
                    }
                }
            ).replace(b"\\\\/", b"\\/"),
            resp_headers=[
                ("content-type", "application/json"),
                ("set-cookie", f"sid={s('setcookie')}; Path=/; HttpOnly"),
                ("x-echo-key", s("echokey")),
            ],
        )
    )
    # Azure: api-key header, deployment path; the Responses stream echoing the key \u-escaped.
    esc = "".join(f"\\u{ord(c):04x}" for c in s("azurekey"))
    stream = [
        b'data: {"type":"response.created","response":{"id":"r1","status":"in_progress"}}\n\n',
        b'data: {"type":"response.output_text.delta","delta":"the key is '
        + esc.encode()
        + b'"}\n\n',
        b'data: {"type":"response.completed","response":{"id":"r1",'
        b'"status":"completed","output":[]}}\n\n',
    ]
    out.append(
        _ex(
            "https://myres.openai.azure.com/openai/deployments/prod/"
            f"responses?api-version=2025-01-01&sig={s('azuresig')}",
            [
                ("content-type", "application/json"),
                ("api-key", s("azurekey")),
                ("ocp-apim-subscription-key", s("apim")),
            ],
            orjson.dumps(
                {
                    "model": "prod",
                    "input": "hi",
                    "stream": True,
                    "mcp_servers": [{"url": "https://m", "authorization_token": s("mcptoken")}],
                }
            ),
            resp_headers=[("content-type", "text/event-stream")],
            chunks=stream,
        )
    )
    # Anthropic: x-api-key; MCP servers' authorization_token.
    out.append(
        _ex(
            "https://api.anthropic.com/v1/messages",
            [
                ("content-type", "application/json"),
                ("x-api-key", s("anthropickey")),
                ("x-auth-token", s("xauthtoken")),
            ],
            orjson.dumps(
                {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 100,
                    "messages": [{"role": "user", "content": "hi"}],
                    "mcp_servers": [
                        {
                            "type": "url",
                            "url": "https://mcp",
                            "name": "m",
                            "authorization_token": s("anthropicmcp"),
                        }
                    ],
                }
            ),
            resp=orjson.dumps(
                {
                    "id": "m",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": "ok"}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                }
            ),
        )
    )
    # Gemini: ?key= and x-goog-api-key; Vertex bearer.
    out.append(
        _ex(
            "https://generativelanguage.googleapis.com/v1beta/models/"
            f"gemini-2.0-flash:generateContent?key={s('geminikey')}",
            [("content-type", "application/json"), ("x-goog-api-key", s("googheader"))],
            orjson.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
        )
    )
    # Bedrock: SigV4 and a session token.
    out.append(
        _ex(
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
            "anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse",
            [
                ("content-type", "application/json"),
                ("x-amz-security-token", s("amztoken")),
                (
                    "authorization",
                    f"AWS4-HMAC-SHA256 Credential={pasted('aws')}/20250101/us-east-1/bedrock/"
                    f"aws4_request, SignedHeaders=host, Signature={s('sigv4')}",
                ),
            ],
            orjson.dumps({"messages": [{"role": "user", "content": [{"text": "hi"}]}]}),
        )
    )
    # Ollama / OpenAI-compatible behind a gateway with the key in the URL path.
    out.append(
        _ex(
            f"http://127.0.0.1:11434/key/{s('pathkey')}/api/chat",
            [("content-type", "application/json")],
            orjson.dumps({"model": "llama3", "messages": [{"role": "user", "content": "hi"}]}),
        )
    )
    out.append(
        _ex(
            f"https://api.telegram.org/bot123456:{s('telegram')}/sendMessage",
            [("content-type", "application/json")],
            b'{"text":"x"}',
        )
    )
    # OAuth token exchange: form body; its JSON answer.
    out.append(
        _ex(
            "https://oauth2.googleapis.com/token",
            [("content-type", "application/x-www-form-urlencoded")],
            f"grant_type=refresh_token&client_id=abc&client_secret={s('formclientsecret')}&"
            f"refresh_token={s('formrefresh')}&api_key={s('formapikey')}".encode(),
            resp=orjson.dumps(
                {"access_token": s("oauthaccess"), "expires_in": 3599, "token_type": "Bearer"}
            ),
        )
    )
    # Multipart upload with credentials as fields.
    boundary = "----lt"
    mp = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nfine-tune\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; '
        f'name="api_key"\r\n\r\n{s("multipartkey")}\r\n--{boundary}\r\nContent-Disposition: '
        f'form-data; name="token"\r\n\r\n{s("multiparttoken")}\r\n--{boundary}--\r\n'
    ).encode()
    out.append(
        _ex(
            "https://api.openai.com/v1/files",
            [("content-type", f"multipart/form-data; boundary={boundary}")],
            mp,
        )
    )
    # Bodies that fail to decode: gzip with a bad CRC, gzip followed by junk, zlib labelled br.
    bad_crc = bytearray(
        gzip.compress(orjson.dumps({"model": "m", "messages": [], "api_key": s("gzipcrc")}))
    )
    bad_crc[-8] ^= 0xFF
    out.append(
        _ex(
            "https://api.openai.com/v1/chat/completions",
            [("content-type", "application/json"), ("content-encoding", "gzip")],
            bytes(bad_crc),
        )
    )
    junk = (
        gzip.compress(orjson.dumps({"error": {"message": "denied", "password": s("gzipjunk")}}))
        + b"\x00junk" * 10
    )
    out.append(
        _ex(
            "https://api.openai.com/v1/embeddings",
            [("content-type", "application/json")],
            b'{"model":"e","input":"x"}',
            resp=junk,
            resp_headers=[("content-type", "application/json"), ("content-encoding", "gzip")],
        )
    )
    mislabelled = zlib.compress(orjson.dumps({"secret": s("zlibasbr")}))
    out.append(
        _ex(
            "https://api.openai.com/v1/models",
            [("content-type", "application/json")],
            b"",
            resp=mislabelled,
            resp_headers=[("content-type", "application/json"), ("content-encoding", "br")],
        )
    )
    return out


def _pieces(secret: str) -> set[str]:
    return telling(secret)


def _leaks(text: str) -> list[str]:
    return sorted({name for name, sec in SENT.items() for p in _pieces(sec) if p in text})


def _run(*args: str) -> str:
    p = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert "Traceback" not in p.stderr, p.stderr
    return p.stdout + p.stderr


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sentinels") / "run.jsonl"
    with CassetteWriter(out) as w:
        for ex in exchanges():
            w.append(ex)  # the pipeline decodes, as in the recorder's writer
    return out


def test_at_least_sixty_sentinels_are_placed() -> None:
    exchanges()
    assert len(SENT) >= 60, len(SENT)


def test_no_piece_of_any_sentinel_reaches_any_file_or_stream(
    recorded: Path, tmp_path: Path
) -> None:
    outputs: dict[str, str] = {"cassette": recorded.read_text("utf-8", "replace")}
    outputs["show"] = _run("show", str(recorded))
    outputs["show --json"] = _run("show", "--json", str(recorded))
    outputs["textconv"] = _run("textconv", str(recorded))
    _run(
        "export",
        "-q",
        "--otel",
        str(tmp_path / "o.json"),
        "--har",
        str(tmp_path / "h.har"),
        str(recorded),
    )
    outputs["export --otel file"] = (tmp_path / "o.json").read_text()
    outputs["export --har file"] = (tmp_path / "h.har").read_text()
    clean = tmp_path / "clean.jsonl"
    with CassetteWriter(clean) as w:
        w.append(
            _ex(
                "https://api.openai.com/v1/chat/completions",
                [("content-type", "application/json")],
                b'{"model":"m","messages":[]}',
            )
        )
    outputs["diff"] = _run("diff", str(clean), str(recorded))
    outputs["verify"] = _run("verify", str(recorded))
    # The replay miss report, for a request that carries the secrets again.
    m = Matcher(read_records(clean).exchanges)
    first = exchanges()[0]
    miss = m.match(
        "POST",
        "/v1/chat/completions?api_key=" + s("queryapikey"),
        first.request_headers,
        first.request_body,
    )
    outputs["replay miss report"] = "\n".join(miss.lines()) if not hasattr(miss, "exchange") else ""
    table = [(where, _leaks(text)) for where, text in outputs.items()]
    print(f"\n{len(SENT)} sentinels; 8-character pieces found per output:")
    for where, leaks in table:
        print(f"  {where:<22} {len(leaks)}  {', '.join(leaks)}")
    assert all(not leaks for _, leaks in table), table


def test_the_look_alikes_and_tool_schemas_survive(recorded: Path) -> None:
    body = read_records(recorded).exchanges[0].request_json()
    for k, v in LOOKALIKES.items():
        assert body[k] == v, k
    props = body["tools"][0]["function"]["parameters"]["properties"]
    assert props == {
        "api_key": {"type": "string", "description": "The API key"},
        "password": {"type": "string"},
    }
    assert body["messages"][0]["role"] == "user"


def test_verify_finds_the_sentinels_when_they_are_put_back(recorded: Path, tmp_path: Path) -> None:
    """The scan is not blind: a cassette with a pasted key in a stored gzip body is flagged."""
    leaky = tmp_path / "leaky.jsonl"
    lines = recorded.read_bytes().splitlines()
    rec = orjson.loads(lines[1])
    rec["response"]["body"] = {
        "b64": base64.b64encode(gzip.compress(f"key {pasted('openai')}".encode())[:-4]).decode()
    }
    leaky.write_bytes(b"\n".join([lines[0], orjson.dumps(rec)]) + b"\n")
    out = subprocess.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "verify", str(leaky)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode != 0 and "compressed" in out.stdout + out.stderr, out.stdout + out.stderr


def test_through_the_real_recorder(tmp_path: Path) -> None:
    """The same families through ``looptap record`` itself (reverse listeners, its writer process),
    with ``--redact-header x-team-ident`` for a header no default would call a credential: no
    8-character piece of a sentinel in any file under the run's directory (cassette, confdir,
    TMPDIR) nor in what the recorder printed."""
    from tests.support.recorder import RecorderProcess, clean_env, needs_recorder
    from tests.support.upstream import FakeUpstream
    from tests.support.wire import http_request

    if needs_recorder.args[0]:
        pytest.skip(needs_recorder.kwargs["reason"])
    own: dict[str, str] = {}

    def r(loc: str) -> str:
        own.setdefault(
            loc,
            "".join(
                secrets.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789")
                for _ in range(28)
            ),
        )
        return own[loc]

    chat = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 64,
        "openai_api_key": r("openai_api_key"),
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "parameters": {"type": "object", "properties": {"token": {"type": "string"}}},
                },
            }
        ],
        "metadata": {
            "auth_token": r("auth_token"),
            "aws_secret_access_key": r("aws_secret_access_key"),
        },
        "messages_extra": [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "function": {
                            "name": "f",
                            "arguments": orjson.dumps({"token": r("toolargtoken")}).decode(),
                        }
                    }
                ],
            }
        ],
    }
    anthropic = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
        "mcp_servers": [
            {
                "type": "url",
                "url": "https://mcp.example.com/sse",
                "name": "x",
                "authorization_token": r("mcp_authorization_token"),
            }
        ],
    }
    boundary = "b0undary7"
    multipart = (
        f"--{boundary}\r\nContent-Disposition: form-data; "
        f'name="api_key"\r\n\r\n{r("multipart_api_key")}\r\n--{boundary}--\r\n'
    ).encode()
    bad_crc = bytearray(
        gzip.compress(
            orjson.dumps({"model": "m", "messages": [], "secret_key": r("gzip_bad_crc_secret_key")})
        )
    )
    bad_crc[-8] ^= 0xFF
    js = [("content-type", "application/json")]
    sends = [
        (
            "OPENAI_BASE_URL",
            "/v1/chat/completions",
            [
                *js,
                ("authorization", f"Bearer {r('bearer')}"),
                ("x-llm-key", r("x-llm-key")),
                ("x-team-ident", r("x-team-ident (--redact-header)")),
            ],
            orjson.dumps(chat),
        ),
        (
            "ANTHROPIC_BASE_URL",
            "/v1/messages",
            [*js, ("x-api-key", r("x-api-key"))],
            orjson.dumps(anthropic),
        ),
        (
            "OPENAI_BASE_URL",
            "/v1/oauth/token",
            [("content-type", "application/x-www-form-urlencoded")],
            f"grant_type=refresh_token&client_secret={r('form_client_secret')}&refresh_token="
            f"{r('form_refresh_token')}".encode(),
        ),
        (
            "OPENAI_BASE_URL",
            f"/key/{r('path_key')}/v1/chat/completions?sig={r('sas_sig')}",
            js,
            b'{"model":"m","messages":[]}',
        ),
        (
            "OPENAI_BASE_URL",
            "/v1/files",
            [("content-type", f"multipart/form-data; boundary={boundary}")],
            multipart,
        ),
        (
            "OPENAI_BASE_URL",
            "/v1/chat/completions",
            [*js, ("content-encoding", "gzip")],
            bytes(bad_crc),
        ),
    ]
    root = tmp_path
    (root / "tmp").mkdir()
    with FakeUpstream(delay=0.0) as up:
        env = clean_env(TMPDIR=str(root / "tmp"))
        with RecorderProcess(
            root / "run.jsonl", root / "conf", up.url, "--redact-header", "x-team-ident", env=env
        ) as rec:
            for var, target, headers, body in sends:
                resp = http_request("127.0.0.1", rec.port(var), "POST", target, headers, body)
                assert resp.complete, (target, resp.error)
            rc = rec.stop()
            log = rec.output
    assert rc == 0, log
    assert len(read_records(root / "run.jsonl").exchanges) == len(sends)
    outputs = {
        str(p.relative_to(root)): p.read_bytes().decode("latin-1")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
    outputs["recorder output"] = log
    found = {
        where: sorted({n for n, v in own.items() for p in _pieces(v) if p in text})
        for where, text in outputs.items()
    }
    print(f"\nreal recorder: {len(own)} sentinels; 8-character pieces found per file or stream:")
    for where, leaks in found.items():
        print(f"  {where:<40} {len(leaks)}  {', '.join(leaks)}")
    assert not any(found.values()), found


def test_a_secret_longer_than_a_miss_report_shows_is_redacted_before_it_is_cut() -> None:
    """A difference is shown cut to 80 characters; a key past that cut, cut first, no longer read
    as a key, and its first characters were printed (found by this file's sentinel test once the
    request's text got shorter). Redacted whole, then cut."""
    clean = [
        _ex(
            "https://api.openai.com/v1/chat/completions",
            [("content-type", "application/json")],
            b'{"model":"m","messages":[]}',
        )
    ]
    key = "AKIA" + "M3MTC4B7IQ2ZR5XW"
    for pad in range(40, 90):
        body = orjson.dumps({"model": "m", "messages": [], "note": "x" * pad + " aws " + key})
        miss = Matcher(clean).match(
            "POST", "/v1/chat/completions", [("content-type", "application/json")], body
        )
        text = "\n".join(miss.lines())  # type: ignore[union-attr]
        assert not any(key[i : i + 8] in text for i in range(len(key) - 7)), (pad, text)
