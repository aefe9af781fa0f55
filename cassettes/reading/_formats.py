"""The format of a file a run is read from, told from its first bytes, once (:func:`sniff`), never
from its name: a looptap cassette (JSON lines opening with the looptap header), a vcrpy /
pytest-recording cassette (YAML, or vcrpy's JSON serializer; LangChain's, gzipped or not), a
mitmproxy flow dump
(``mitmdump -w``: tnetstrings). A HAR file is recognised and refused with a message (looptap
writes HAR, it does not read it); anything else gets one error naming what was tried
(:func:`refused`)."""

from __future__ import annotations

import re
import zlib
from collections.abc import Collection
from pathlib import Path

from ..bounds import loads_or_none
from ..errors import CassetteFormatError
from ..lazy import pattern
from ..storage import is_flow_file, open_regular
from ..wire import Exchange

__all__ = ["FORMATS", "detect", "refused", "sniff", "unmasked"]

#: The formats :func:`open_run` reads, by the name :attr:`Run.kind` gives them.
FORMATS = ("looptap", "vcr", "mitmproxy")
#: How each format is named in messages.
DESCRIBED = {
    "looptap": "a looptap cassette (JSON lines)",
    "vcr": "a vcrpy cassette (YAML, or LangChain's .yaml.gz)",
    "mitmproxy": "a mitmproxy flow file (mitmdump -w)",
    "har": "a HAR file",
}
#: How many bytes :func:`sniff` is given.
HEAD = 4096

_BOM = b"\xef\xbb\xbf"
_JSON_KEY = re.compile(rb'\{\s*"([A-Za-z_]{1,32})"\s*:')
#: A YAML document's first significant line: a directive, a document start or a top-level key.
_YAML_START = pattern(rb"(?:%YAML|---(?:\s|$)|[A-Za-z_][\w.-]*\s*:(?:\s|$))")


def sniff(head: bytes) -> str:
    """The format of a file from its first bytes (:data:`HEAD` of them): one of :data:`FORMATS`,
    ``"har"``, ``"empty"`` (nothing but white space) or ``"unknown"``. A JSON object is a looptap
    cassette unless its first key names another format (its reader says what else is wrong). A
    gzip-compressed file is told by what it holds: a vcrpy cassette (LangChain's ``.yaml.gz``) or
    ``"unknown"``."""
    if head[:2] == b"\x1f\x8b":
        try:
            inner = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, HEAD)
        except zlib.error:
            return "unknown"
        return "vcr" if inner[:2] != b"\x1f\x8b" and sniff(inner) == "vcr" else "unknown"
    if is_flow_file(head):
        return "mitmproxy"
    text = head.removeprefix(_BOM).lstrip()
    if not text:  # (a head as long as HEAD was cut: more may follow the white space)
        return "empty" if len(head) < HEAD else "unknown"
    if text.startswith(b"{"):
        m = _JSON_KEY.match(text)
        key = m.group(1) if m else b""
        return {b"log": "har", b"interactions": "vcr"}.get(key, "looptap")
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith(b"#"):
            return "vcr" if _YAML_START.match(s) else "unknown"
    return "unknown"


def refused(path: Path, kind: str, formats: Collection[str]) -> CassetteFormatError:
    names = [DESCRIBED[f] for f in formats]
    wanted = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    if kind == "har":
        return CassetteFormatError(
            f"{path}: a HAR file: looptap writes HAR (export "
            f"--har) but does not read it; it reads {wanted}"
        )
    if kind == "empty":
        return CassetteFormatError(f"{path}: empty file, nothing to read")
    if kind == "unknown":
        return CassetteFormatError(
            f"{path}: not a looptap cassette, a vcrpy cassette or a mitmproxy flow file (its first "
            "bytes are none of these)"
        )
    return CassetteFormatError(f"{path}: {DESCRIBED[kind]}; this command reads {wanted}")


def detect(path: str | Path) -> str:
    """The format of the file at ``path`` (:func:`sniff` of its first bytes). Raises
    :class:`~cassettes.errors.CassetteIOError` for a file that cannot be opened or is not a
    regular file."""
    with open_regular(path) as fh:
        return sniff(fh.read(HEAD))


def unmasked(ex: Exchange) -> Exchange:
    """``ex`` with a URL where its recording masked it (LangChain's langchain-openai cassettes
    store ``uri: '**REDACTED**'``): the OpenAI endpoint its bodies' shape says
    (:func:`cassettes.providers.masked_endpoint`), noted as inferred on the round trip."""
    if "://" in ex.url:
        return ex
    from ..providers import masked_endpoint

    found = masked_endpoint(
        loads_or_none(ex.request_body), b"".join(c for _t, c in ex.response_chunks)
    )
    masked = ex.url[:40]
    if found is None:
        ex.notes.append(f"the recording gives no URL ({masked!r}); its API is not told")
        return ex
    ex.url, api = found
    ex.notes.append(
        f"the recording masked the URL ({masked!r}): {ex.url} inferred from the bodies' shape "
        f"({api}; the host is not recorded)"
    )
    return ex
