"""Import vcrpy / pytest-recording YAML cassettes as :class:`~cassettes.wire.Exchange`
objects.

Real-world variants handled (all seen in ``../shared/corpus``): bodies as strings, as bytes
(``!!binary``), as ``{string: …}`` mappings, already parsed under ``parsed_body`` (pydantic-ai's
serializer) or as a parsed mapping under ``body`` itself; vcrpy 4's httpx responses
(``status_code``, ``content``: the body as httpx decoded it, whatever ``Content-Encoding`` says);
gzip bodies with or without a truthful ``Content-Encoding``; header names in any case and values as
lists or scalars; a whole SSE stream stored as one string; non-LLM calls mixed in; header names
tagged with multidict's ``istr`` class (vcrpy's aiohttp stub: :data:`STRING_TAGS`, read as the
names they wrap, any other Python or local tag refused naming it). An imported stream is one chunk
with no timing (vcrpy records none).

LangChain's own cassettes (its partner packages' ``tests/cassettes/*.yaml.gz``, written by the
serializer of ``langchain-tests``) are vcrpy's recording dumped as it is held, not as vcrpy writes
it: two lists, ``requests`` and ``responses``, paired by position, instead of ``interactions``;
the YAML gzip-compressed as a whole (or not). Their header values are often all masked
(``**REDACTED**``, ``Content-Type`` too): the parsers tell a body's framing from the bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ..bounds import MAX_DECODED_BYTES
from ..errors import ImportFormatError
from ..hints import count
from ..wire import Decoder, Exchange, Headers, OverBudget, decode_exchange, header

__all__ = ["load_vcr", "read_vcr"]


def _headers(raw: Any) -> Headers:
    out: Headers = []
    if isinstance(raw, dict):
        for k, v in raw.items():
            for item in v if isinstance(v, list) else [v]:
                out.append((str(k), "" if item is None else str(item)))
    elif isinstance(raw, list):  # [[name, value], …]
        for pair in raw:
            if isinstance(pair, (list, tuple)) and len(pair) == 2:
                out.append((str(pair[0]), str(pair[1])))
    return out


def _yaml_value(o: Any) -> Any:
    """JSON for the YAML values orjson does not take (``!!binary`` inside a parsed body)."""
    if isinstance(o, bytes):
        return o.decode("utf-8", "replace")
    raise TypeError(f"Type is not JSON serializable: {type(o).__name__}")


def _json(value: Any) -> bytes:
    try:
        return orjson.dumps(value, default=_yaml_value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError as exc:
        raise ImportFormatError(f"a parsed body that is not JSON: {exc}") from None


def _body(side: dict[str, Any]) -> bytes:
    if "parsed_body" in side and side["parsed_body"] is not None:
        parsed = side["parsed_body"]
        return parsed if isinstance(parsed, bytes) else _json(parsed)
    b = side.get("body")
    if isinstance(b, dict):
        if "string" in b or "base64_string" in b:
            b = b.get("string", b.get("base64_string"))
        else:
            return _json(b)  # a body stored already parsed, without parsed_body's name
    if b is None:
        return b""
    if isinstance(b, bytes):
        return b
    if isinstance(b, str):
        return b.encode("utf-8", "surrogatepass")
    if isinstance(b, (dict, list)):
        return _json(b)
    return str(b).encode()


def _code(raw: Any) -> int | None:
    """An HTTP status code written as a number or digits (anything else, or out of range: none)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, str)) or not str(raw).isdigit():
        return None
    code = int(raw)
    return code if 100 <= code <= 999 else None


def _status(raw: Any) -> tuple[int | None, str | None]:
    """``status: {code, message}`` (vcrpy), or a bare code (``status_code``: vcrpy 4's httpx
    stub)."""
    if isinstance(raw, dict):
        message = raw.get("message")
        return _code(raw.get("code")), message if isinstance(message, str) else None
    return _code(raw), None


def _exchange(item: Any, index: int) -> Exchange:
    if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
        raise ImportFormatError(f"interaction {index} has no request")
    req = item["request"]
    resp = item.get("response") if isinstance(item.get("response"), dict) else None
    ex = Exchange(
        method=str(req.get("method") or "GET").upper(),
        url=str(req.get("uri") or req.get("url") or ""),
        request_headers=_headers(req.get("headers")),
    )
    ex.request_body, ex.request_encoded = _body(req), True
    if resp is None:
        ex.notes.append("vcr interaction has no response")
        decode_exchange(ex)
        return ex
    ex.status, ex.reason = _status(resp.get("status", resp.get("status_code")))
    ex.response_headers = _headers(resp.get("headers"))
    # vcrpy 4's httpx stub stored ``content`` (httpx's decoded body) instead of ``body``.
    legacy = "body" not in resp and "parsed_body" not in resp and "content" in resp
    body = _body({"body": resp["content"]} if legacy else resp)
    if "parsed_body" in resp or legacy:
        # pydantic-ai's serializer stores the body parsed and already decoded; so did vcrpy 4's
        # httpx stub.
        ex.response_chunks = [(None, body)] if body else []
        if header(ex.response_headers, "content-encoding"):
            ex.notes.append(
                "Content-Encoding header kept from the recording; the body was stored decoded"
            )
    else:
        ex.response_chunks, ex.response_encoded = [(None, body)], True
    decode_exchange(ex)
    return ex


#: Deepest YAML nesting loaded (real cassettes nest a dozen levels; the C loader recurses per level
#: and a 200 KB file of nested brackets crashed it).
YAML_DEPTH = 200
#: Most nodes a document may hold once its aliases are expanded: a 603-byte "billion laughs" file
#: expands to billions (and did grow to 8 GB when its bodies were written out as JSON).
YAML_EXPANDED = 2_000_000


#: The Python tags vcrpy writes for aiohttp's header names (multidict's case-insensitive ``istr``, a
#: ``str`` subclass, dumped by PyYAML's full dumper as ``!!python/object/apply:…`` or
#: ``!!python/object/new:…`` around the name). Seen in DataDog/dd-apm-test-agent's and
#: DataDog/dd-trace-py's cassettes; the others are the same class under multidict's other modules.
STRING_TAGS = frozenset(
    f"tag:yaml.org,2002:python/object/{kind}:{cls}"
    for kind in ("apply", "new")
    for cls in (
        "multidict._multidict.istr",
        "multidict._multidict_py.istr",
        "multidict.istr",
    )
)


def _tag_string(loader: Any, suffix: str, node: Any) -> str:
    """The name a string tag holds (``- Accept`` under the tag, or ``args: [Accept]``): the scalar
    taken as text, nothing constructed. Any other tag, or a known tag around anything but one
    string, is refused naming the tag."""
    import yaml

    tag = str(node.tag)
    if tag in STRING_TAGS:
        items = node.value
        if isinstance(node, yaml.MappingNode):
            items = next((v.value for k, v in node.value if k.value == "args"), [])
            items = items if isinstance(items, list) else []
        if isinstance(items, list) and len(items) == 1 and isinstance(items[0], yaml.ScalarNode):
            return str(loader.construct_scalar(items[0]))
    raise yaml.constructor.ConstructorError(
        None, None, f"a YAML tag looptap does not read: {_short_tag(tag)}", node.start_mark
    )


def _short_tag(tag: str) -> str:
    return (
        "!!" + tag.removeprefix("tag:yaml.org,2002:")
        if tag.startswith("tag:yaml.org,2002:")
        else tag
    )


@functools.cache
def _loader() -> Any:
    """PyYAML's safe loader, in C where it is built with libyaml, reading :data:`STRING_TAGS` as the
    strings they wrap (every other non-standard tag refused, naming it). PyYAML is loaded by the
    first vcrpy cassette read, not by every command that imports the storage package."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc, valid-type]
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", _tag_string)
    Loader.add_multi_constructor("!", _tag_string)
    Loader.add_multi_constructor("tag:", _tag_string)
    return Loader


def _check_yaml(data: bytes | str, name: str) -> None:
    """Refuse YAML nested deeper than :data:`YAML_DEPTH` or expanding (aliases counted as many times
    as they are used) past :data:`YAML_EXPANDED` nodes. Reads the event stream, which the parser
    produces without recursion, before anything is composed."""
    import yaml

    sizes: dict[str, int] = {}
    stack: list[tuple[str | None, int]] = [(None, 0)]  # (anchor, nodes so far) per open collection
    try:
        for ev in yaml.parse(data, Loader=_loader()):
            if isinstance(ev, yaml.CollectionStartEvent):
                stack.append((ev.anchor, 1))
                if len(stack) - 1 > YAML_DEPTH:
                    raise ImportFormatError(
                        f"{name}: YAML nested deeper than {YAML_DEPTH} levels; not loaded"
                    )
                continue
            if isinstance(ev, yaml.CollectionEndEvent):
                anchor, n = stack.pop()
                if anchor is not None:
                    sizes[anchor] = n
            elif isinstance(ev, yaml.ScalarEvent):
                n = 1
                if ev.anchor is not None:
                    sizes[ev.anchor] = 1
            elif isinstance(ev, yaml.AliasEvent):
                n = sizes.get(ev.anchor or "", 1)
            else:
                continue
            anchor, count = stack[-1]
            stack[-1] = (anchor, count + n)
            if count + n > YAML_EXPANDED:
                raise ImportFormatError(
                    f"{name}: YAML expands to more than {YAML_EXPANDED:,} nodes through its "
                    "aliases (an alias bomb?); not loaded"
                )
    except yaml.YAMLError:
        return  # the loader reports it, with its own message


def _gunzip(data: bytes, name: str) -> bytes:
    """A gzip-compressed file's content (LangChain's ``.yaml.gz``), at most
    :data:`~cassettes.bounds.MAX_DECODED_BYTES`; a file cut short or past the budget is refused."""
    dec = Decoder("gzip")
    try:
        out = b"".join(dec.feed(data[i : i + (1 << 20)]) for i in range(0, len(data), 1 << 20))
    except OverBudget:
        raise ImportFormatError(
            f"{name}: gzip data decompresses past {MAX_DECODED_BYTES >> 20} MiB; not loaded"
        ) from None
    except Exception as exc:
        raise ImportFormatError(f"{name}: damaged gzip data ({exc}); not loaded") from None
    if not dec.finished:
        raise ImportFormatError(f"{name}: gzip data cut short; not loaded")
    return out


def _interactions(doc: Any, name: str) -> list[Any]:
    """vcrpy's ``interactions``, or LangChain's ``requests`` and ``responses`` paired by position (a
    request left without its response is imported with a note saying so)."""
    if isinstance(doc, dict) and isinstance(doc.get("interactions"), list):
        return list(doc["interactions"])
    if isinstance(doc, dict) and isinstance(doc.get("requests"), list):
        responses = doc.get("responses")
        if not isinstance(responses, list):
            raise ImportFormatError(f"{name}: a 'requests' list without its 'responses' list")
        if len(responses) > len(doc["requests"]):
            raise ImportFormatError(
                f"{name}: {count(len(responses), 'response')} to "
                f"{count(len(doc['requests']), 'request')}"
            )
        return [
            {"request": req, "response": responses[i] if i < len(responses) else None}
            for i, req in enumerate(doc["requests"])
        ]
    raise ImportFormatError(
        f"{name}: not a vcrpy cassette (no 'interactions' list, nor LangChain's 'requests' and "
        "'responses')"
    )


def read_vcr(data: bytes | str, name: str = "<vcr>") -> Iterator[Exchange]:
    """Exchanges of a vcrpy YAML cassette, or of LangChain's (gzipped or not). Raises
    :class:`ImportFormatError` if it is neither."""
    import yaml  # as _loader says

    if isinstance(data, bytes) and data[:2] == b"\x1f\x8b":
        data = _gunzip(data, name)
    _check_yaml(data, name)
    try:
        doc = yaml.load(data, Loader=_loader())
    except yaml.constructor.ConstructorError as exc:
        raise ImportFormatError(f"{name}: {exc.problem}; not loaded") from None
    except yaml.YAMLError as exc:
        raise ImportFormatError(f"{name}: not valid YAML: {str(exc).splitlines()[0]}") from None
    for i, item in enumerate(_interactions(doc, name)):
        yield _exchange(item, i)


def load_vcr(path: str | Path) -> list[Exchange]:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ImportFormatError(f"{p}: cannot read: {exc.strerror or exc}") from None
    return list(read_vcr(data, str(p)))
