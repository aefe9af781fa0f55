"""Parse once: the writer's parse of a response, sealed into its cassette record.

Framing and reassembling a streamed response is most of what reading a run costs, and the writer
has already done it. So the writer stores its result with the record (``"parsed"``: the response
side of the :class:`~cassettes.parsing.roundtrip.RoundTrip`), and a reader takes it instead of
parsing the raw chunks again, when, and only when, all of this holds:

- the block's MAC checks out under this machine's key (a random 32-byte file, made on the first
  write, readable by its owner only: ``$LOOPTAP_STATE_DIR``, else ``$XDG_STATE_HOME/looptap``, else
  ``~/.local/state/looptap``). A cassette from anywhere else, or edited by hand, is parsed from its
  raw bytes, so a file can never show one thing and replay another;
- the MAC covers the parser's source (a digest of the modules that turn raw bytes into a parse), so
  a looptap that parses differently re-parses;
- it covers everything the response side reads: status, headers, every chunk with its time offset,
  the transport error, and what the request side decided (family, operation, stream).

Anything else (no key, another machine, a torn or edited block, a model that does not validate)
means the raw is parsed, exactly as before: the block only ever saves time. The raw stays the
truth (``DESIGN.md``: what is derived can always be recomputed from it).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path
from typing import Any, NamedTuple

import orjson
from pydantic import ValidationError

from cassettes.errors import CassetteFormatError
from cassettes.models import NormalisedResponse
from cassettes.storage.codec import read_response
from cassettes.storage.store import open_regular
from cassettes.wire.exchange import Exchange, Headers

__all__ = ["ResponseSide", "machine_key", "restore", "seal", "state_dir"]

#: A response side whose stored form is larger than this is not sealed (a reader parses the raw):
#: it would double the record for a response whose parse is a small part of reading it.
MAX_SEALED = 512 * 1024

#: The modules whose code decides what a raw response parses to (paths under ``cassettes/``).
_PARSER_SOURCES = (
    "bounds.py",
    "storage/codec.py",
    "wire/exchange.py",
    "wire/framing.py",
    "models.py",
    "parsing/roundtrip.py",
    "parsing/sealed.py",
    "providers",
)

_KEY_FILE = "parse.key"


class ResponseSide(NamedTuple):
    """What parsing the response adds to a round trip (the request side is parsed every time)."""

    framing: str | None
    ttft: float | None
    stream: bool
    transport_error: str | None
    notes: list[str]
    errors: list[str]
    response: NormalisedResponse | None


def state_dir() -> Path:
    """Where looptap keeps this machine's state (the sealing key)."""
    if os.environ.get("LOOPTAP_STATE_DIR"):
        return Path(os.environ["LOOPTAP_STATE_DIR"])
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "looptap"


_cache: dict[str, bytes | None] = {}


def machine_key(create: bool) -> bytes | None:
    """This machine's sealing key (``None`` when there is none and it may not or cannot be made)."""
    where = "key:" + "\0".join(
        os.environ.get(v, "") for v in ("LOOPTAP_STATE_DIR", "XDG_STATE_HOME", "HOME")
    )
    cached = _cache.get(where)
    if cached is not None:
        return cached
    try:
        path = state_dir() / _KEY_FILE
    except RuntimeError:  # no home directory
        return None
    key: bytes | None
    try:
        key = _read_key(path)
    except OSError:
        if not create:
            return None
        key = _make_key(path)
    if key is None or len(key) != 32:
        return None
    _cache[where] = key
    return key


def _read_key(path: Path) -> bytes:
    """The key file's bytes (a FIFO or a device put in its place is refused, never waited on:
    there is then no key, and nothing is sealed or kept)."""
    with open_regular(path) as f:
        return f.read(64)


def _make_key(path: Path) -> bytes | None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        try:
            return _read_key(path)
        except OSError:
            return None
    except OSError:
        return None
    key = os.urandom(32)
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key


def parser_digest() -> bytes | None:
    """A digest of the parser's source; ``None`` when its files cannot be read (then nothing is
    sealed or trusted)."""
    if "parser" not in _cache:
        root = Path(__file__).resolve().parents[1]  # cassettes/
        _cache["parser"] = source_digest(root, [root / name for name in _PARSER_SOURCES])
    return _cache["parser"]


def source_digest(root: Path, paths: list[Path], extra: bytes = b"") -> bytes | None:
    """A digest of ``extra`` and of the Python source under ``paths`` (a directory: every ``.py``
    below it), each file by its path relative to ``root``, its length and its bytes; ``None``
    when a file cannot be read."""
    h = hashlib.blake2b(digest_size=16)
    h.update(extra)
    try:
        for p in paths:
            for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
                data = f.read_bytes()
                h.update(
                    f.relative_to(root).as_posix().encode() + b"\0" + len(data).to_bytes(8, "big")
                )
                h.update(data)
    except OSError:
        return None
    return h.digest()


def _mac(
    key: bytes,
    status: int | None,
    headers: Headers,
    chunks: list[tuple[float | None, bytes]],
    facts: list[Any],
    block: bytes,
) -> str | None:
    parser = parser_digest()
    if parser is None:
        return None
    h = hashlib.blake2b(key=key, digest_size=16)
    h.update(parser)
    try:
        h.update(orjson.dumps([status, headers, facts, [[t, len(c)] for t, c in chunks]]))
    except (orjson.JSONEncodeError, TypeError):  # a header that is not valid Unicode: not sealed
        return None
    h.update(b"".join(c for _, c in chunks))
    h.update(block)
    return h.hexdigest()


def _facts(
    family: str, operation: str | None, stream: bool, transport_error: str | None, body: Any
) -> list[Any]:
    """What the request side decided, and the one request field the response side reads."""
    turn_id = body.get("turn_id") if isinstance(body, dict) else None
    return [
        family,
        operation,
        stream,
        transport_error,
        turn_id if isinstance(turn_id, str) else None,
    ]


def _block(side: ResponseSide) -> dict[str, Any]:
    return {
        "framing": side.framing,
        "ttft": side.ttft,
        "stream": side.stream,
        "transport_error": side.transport_error,
        "notes": side.notes,
        "errors": side.errors,
        "response": side.response.model_dump(mode="json", exclude_defaults=True)
        if side.response is not None
        else None,
    }


def seal(
    rec: dict[str, Any],
    side: ResponseSide,
    family: str,
    operation: str | None,
    stream: bool,
    body: Any,
) -> None:
    """Add the ``parsed`` block to the record ``rec`` of a round trip whose response side the
    writer parsed as ``side``. Sealed against the response *as a reader will rebuild it from the
    record* (a JSON body is re-serialised, offsets are rounded), so the reader's check compares
    like with like. Leaves ``rec`` without the block whenever it cannot be sealed; never raises
    for anything a response holds (the recorder calls it)."""
    key = machine_key(create=True)
    if key is None:
        return
    try:
        status, headers, chunks = read_response(rec)
    except (TypeError, ValueError, CassetteFormatError):  # a JSON body deeper than orjson writes, …
        return
    try:
        block = _block(side)
        data = orjson.dumps(block)
    except (orjson.JSONEncodeError, TypeError):  # nested deeper than orjson writes, or not JSON
        return
    if len(data) > MAX_SEALED:
        return
    mac = _mac(
        key,
        status,
        headers,
        chunks,
        _facts(family, operation, stream, rec.get("transport_error"), body),
        data,
    )
    if mac is not None:
        rec["parsed"] = {**block, "mac": mac}


def restore(
    stored: Any, ex: Exchange, family: str, operation: str | None, stream: bool, body: Any
) -> ResponseSide | None:
    """The response side sealed in a record, or ``None`` when it cannot be trusted (then the
    caller parses the raw). Never raises."""
    if not isinstance(stored, dict) or not isinstance(stored.get("mac"), str):
        return None
    key = machine_key(create=False)
    if key is None:
        return None
    block = {k: v for k, v in stored.items() if k != "mac"}
    try:
        data = orjson.dumps(block)
    except (orjson.JSONEncodeError, TypeError):
        return None
    mac = _mac(
        key,
        ex.status,
        ex.response_headers,
        ex.response_chunks,
        _facts(family, operation, stream, ex.transport_error, body),
        data,
    )
    if mac is None or not hmac.compare_digest(mac, stored["mac"]):
        return None
    try:
        resp = block.get("response")
        return ResponseSide(
            framing=block["framing"],
            ttft=block["ttft"],
            stream=bool(block["stream"]),
            transport_error=block["transport_error"],
            notes=list(block["notes"]),
            errors=list(block["errors"]),
            response=NormalisedResponse.model_validate(resp) if resp is not None else None,
        )
    except (KeyError, TypeError, ValidationError):
        return None
