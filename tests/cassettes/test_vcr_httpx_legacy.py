"""vcrpy 4's httpx stub stored a response as ``status_code`` / ``http_version`` / ``headers`` (one
string per name) / ``content`` (the body as httpx decoded it, so a ``Content-Encoding: gzip`` header
sits beside a plain body). Such cassettes were read as "no response" (issue 45): they are read
as the stock format is, body, status and all."""

from __future__ import annotations

import orjson
import yaml

from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.storage import read_vcr
from looptap.cassettes.wire import Exchange
from tests.cassettes.test_malformed_input import anthropic_sse, openai_json, openai_sse


def _legacy(ex: Exchange, *, status: int | str = 200, gzip_header: bool = True) -> dict:
    """``ex`` as vcrpy 4.x's ``httpx_stubs._to_serialized_response`` wrote it."""
    headers = {
        k: v
        for k, v in ex.response_headers
        if k.lower() not in ("content-encoding", "content-length")
    }
    if gzip_header:
        headers["content-encoding"] = "gzip"  # kept from the wire; ``content`` is already decoded
    return {
        "request": {
            "method": ex.method,
            "uri": ex.url,
            "headers": {"Content-Type": ["application/json"]},
            "body": ex.request_body.decode(),
        },
        "response": {
            "status_code": status,
            "http_version": "HTTP/1.1",
            "headers": headers,
            "content": ex.response_body.decode(),
        },
    }


def _stock(ex: Exchange) -> dict:
    return {
        "request": {
            "method": ex.method,
            "uri": ex.url,
            "headers": {"Content-Type": ["application/json"]},
            "body": ex.request_body.decode(),
        },
        "response": {
            "status": {"code": ex.status, "message": "OK"},
            "headers": {"Content-Type": [ex.response_header("content-type") or ""]},
            "body": {"string": ex.response_body.decode()},
        },
    }


def test_vcrpy4_httpx_responses_are_read_like_stock_ones() -> None:
    bases = [openai_sse(), anthropic_sse(), openai_json()]
    legacy = list(read_vcr(yaml.safe_dump({"interactions": [_legacy(b) for b in bases]})))
    stock = list(read_vcr(yaml.safe_dump({"interactions": [_stock(b) for b in bases]})))
    for base, old, new in zip(bases, legacy, stock, strict=True):
        assert old.status == 200 and not any("no response" in n for n in old.notes), old.notes
        assert old.response_body == base.response_body  # not gunzipped again, nothing lost
        rt, want = parse_exchange(old), parse_exchange(new)
        assert rt.response is not None and rt.response == want.response, base.url
        assert rt.complete is True


def test_a_legacy_error_status_is_kept() -> None:
    base = openai_json()
    err = orjson.dumps(
        {
            "error": {
                "message": "Rate limit reached",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        }
    ).decode()
    doc = _legacy(base, status="429", gzip_header=False)
    doc["response"]["content"] = err
    (ex,) = read_vcr(yaml.safe_dump({"interactions": [doc]}))
    assert ex.status == 429 and ex.response_body == err.encode()
    rt = parse_exchange(ex)
    assert rt.response is None or not rt.response.text


def test_nonsense_status_codes_are_no_status() -> None:
    base = openai_json()
    for bad in (True, "abc", 70000, -1, None, [200]):
        doc = _legacy(base, gzip_header=False)
        doc["response"]["status_code"] = bad
        (ex,) = read_vcr(yaml.safe_dump({"interactions": [doc]}))
        assert ex.status is None, bad
