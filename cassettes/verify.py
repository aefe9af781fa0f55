"""``looptap verify FILE``: scan a cassette for secrets that should never have reached the disk.

The scanner is the redactor's own detector (:mod:`cassettes.recording._detector`: gitleaks'
maintained ruleset plus looptap's rules for the LLM vendors' keys — one detector for both, so a key
``verify`` can find is a key redaction masks), plus configured patterns (``--pattern REGEX``, and
``patterns`` under ``[tool.looptap.verify]`` in ``pyproject.toml`` or in a ``--config`` TOML file).

Every line of the file is scanned, whatever it holds: a JSON record is walked field by field (so a
find is reported as ``file:line:field``), a line that is not JSON (a torn record) is scanned as
text. Besides the text as stored, the scanner looks at the forms a secret can hide in: base64
bodies and header values (``{"b64": …}``), URL-encoded text (``%2F``), base64 tokens (``Basic …``
credentials, encoded blobs, ``data:`` URLs), JSON escapes inside stored text (``\\u0073k-…`` in a
stream's events), and a stream reassembled as its reader would (the text a field carries across
SSE, NDJSON, WebSocket and AWS event-stream events, joined: a key streamed a few characters per
event). A find is printed masked (its first characters only),
so the report itself does not spread the secret.

Exit status: 0 clean, 1 secrets found, 2 the file could not be read or a pattern is invalid.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import itertools
import os
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from .bounds import RECORD_DEPTH, parse_toml, record_fits
from .errors import CassetteError, CassetteIOError
from .hints import count
from .jsonpath import PathItem, format_path, walk
from .patterns import PatternError, UserPattern
from .recording import (
    B64_TOKEN,
    REDACTED,
    b64_text,
    credential_values,
    cut_texts,
    default_detector,
    detector,
    header_secret,
    looks_secret,
    path_secrets,
    secret_name,
    stream_texts,
)
from .storage import decode_chunks, open_regular, read_config
from .untrusted import clean_line
from .wire import body_cut, salvage

__all__ = ["scan_file", "scan_lines"]

#: The kind of a find by the name it stands after (the detector's rule: recording._detector).
NAMED = "credential by name"
#: How a list of strings read as one command line is named in a find's field.
COMMAND_LINE = "(as one command line)"
EXIT_CLEAN = 0
EXIT_FOUND = 1
EXIT_ERROR = 2

#: A JSON escape inside stored text (``\u0073``, ``\/``, ``\"``, ``\n``).
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|([\\/\"bfnrt]))")
_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(text: str) -> str:
    """``text`` with its JSON escapes decoded (lone surrogates from ``\\ud83d`` kept as they
    are)."""
    return _ESCAPE.sub(
        lambda m: chr(int(m.group(1), 16)) if m.group(1) else _SIMPLE.get(m.group(2), m.group(2)),
        text,
    )


@dataclass(frozen=True)
class Find:
    """One secret found: where (file, line, JSON field path) and what kind."""

    path: str
    line: int
    field: str
    kind: str
    #: The secret's first characters and its length, never the whole secret.
    masked: str
    #: How it was stored: ``text``, ``base64`` or ``url-encoded``.
    form: str = "text"

    def __str__(self) -> str:
        how = "" if self.form == "text" else f", {self.form}"
        return f"{self.path}:{self.line}:{self.field}: {self.kind} ({self.masked}{how})"


def _mask(secret: str, kind: str = "") -> str:
    # a short password's first six characters are most of it
    if kind.startswith(("credential field", NAMED)):
        return f"{len(secret)} chars"
    return f"{secret[:6]}… {len(secret)} chars"


class Scanner:
    def __init__(self, extra_patterns: Iterable[str]) -> None:
        self.detector = detector(extra_patterns)

    def _matches(self, text: str) -> Iterator[tuple[str, str]]:
        for name, s, e in self.detector.find(text):
            yield name, text[s:e]

    def text(self, text: str) -> Iterator[tuple[str, str, str]]:
        """(kind, secret, form) for every secret in ``text`` and in its hidden forms."""
        seen: set[tuple[str, str]] = set()
        for kind, secret in self._matches(text):
            seen.add((kind, secret))
            yield kind, secret, "text"
        decoded = (
            ("json-escaped", _unescape(text) if "\\" in text else None),
            ("url-encoded", unquote(text) if "%" in text else None),
        )
        tokens = (("base64", b64_text(m.group(0))) for m in B64_TOKEN.finditer(text))
        for form, inner in itertools.chain(decoded, tokens):
            if inner is None or inner == text:
                continue
            for kind, secret in self._matches(inner):
                if (kind, secret) not in seen:
                    seen.add((kind, secret))
                    yield kind, secret, form

    def named(self, text: str) -> Iterator[tuple[str, str, str]]:
        """(kind, value, form) for every value under a credential's name in JSON held in a
        string (tool-call arguments, a tool result) that is not redacted: the redactor masks
        these whatever their length (:func:`cassettes.recording._credentials.credential_values`)."""
        if text.lstrip()[:1] not in ("{", "["):
            return
        for name, s, e, _quoted in credential_values(text):
            yield (
                f"credential field {clean_line(name[:60])!r} in JSON in a string",
                text[s:e],
                "text",
            )

    def blob(self, data: bytes) -> Iterator[tuple[str, str, str]]:
        """Secrets in bytes stored as base64 (a binary body, a non-UTF-8 header value), and in
        what they decompress to, however broken (a body kept compressed because it failed to
        decode hides its secrets from a plain scan)."""
        for kind, secret, form in self.text(data.decode("utf-8", "replace")):
            yield kind, secret, "base64" if form == "text" else f"base64, {form}"
        inner = salvage(data)
        if inner:
            for kind, secret, form in self.text(inner.decode("utf-8", "replace")):
                yield (
                    kind,
                    secret,
                    "base64, compressed" if form == "text" else f"base64, compressed, {form}",
                )


def _is_blob(value: Any) -> bool:
    """A body or header value stored as bytes: ``{"b64": …}`` (scanned as bytes, and as what
    they decompress to)."""
    return (
        isinstance(value, dict)
        and set(value) <= {"b64", "t", "too_deep"}
        and isinstance(value.get("b64"), str)
    )


def _joined(where: str, path: tuple[PathItem, ...]) -> str:
    """``where`` followed by ``path`` in the path syntax (:func:`.jsonpath.format_path`)."""
    tail = format_path(path, "")
    return where + tail if not where or tail[:1] in ("[", "") else f"{where}.{tail}"


def _leaves(value: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    """(field, leaf) of every string and every ``{"b64": …}`` in ``value``, in document order."""
    for leaf, path, _, _ in walk(value, RECORD_DEPTH, _is_blob):
        if isinstance(leaf, str) or _is_blob(leaf):
            yield _joined(where, path), leaf


def _fields(rec: Any) -> Iterator[tuple[str, Any]]:
    """Like :func:`_leaves`, with a record's header lists (``[[name, value], …]``) reported by
    header name (``request.headers[authorization]``, the name itself ``….name``) and a stored
    binary body as ``….b64``."""
    # A header list is walked here pair by pair; the walk does not go into it (it asks ``leaf``
    # after the loop below has seen the list).
    header_lists: set[int] = set()

    def leaf(v: Any) -> bool:
        return _is_blob(v) or id(v) in header_lists

    for value, path, holder, key in walk(rec, RECORD_DEPTH, leaf):
        where = format_path(path, "")
        if key == "headers" and isinstance(holder, dict) and isinstance(value, list):
            header_lists.add(id(value))
            for pair in value:
                if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str):
                    yield from _leaves(pair[1], f"{where}[{pair[0]}]")
                    yield from _leaves(pair[0], f"{where}[{pair[0]}].name")
                else:
                    yield from _leaves(pair, where)
        elif _is_blob(value):
            yield f"{where}.b64", value
        elif isinstance(value, str):
            yield where, value
        elif isinstance(value, list) and len(value) > 1 and all(isinstance(v, str) for v in value):
            # an argv, read as the redactor reads it: the command line it makes (``-u``, then
            # ``user:<password>`` as the next word)
            yield f"{where} {COMMAND_LINE}", " ".join(value)


def scan_lines(
    lines: Iterable[bytes], path: str = "<cassette>", extra_patterns: Iterable[str] = ()
) -> list[Find]:
    """Every secret in ``lines`` (the lines of a cassette, without their newlines)."""
    scanner = Scanner(extra_patterns)
    finds: list[Find] = []
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            rec: Any = orjson.loads(raw)
            where = "(nested too deep to walk)"
            # a record deeper than looptap writes is scanned as text
            walkable = record_fits(rec, raw)
        except orjson.JSONDecodeError:
            walkable, where = False, "(not JSON)"
        if not walkable:
            text = raw.decode("utf-8", "replace")
            for kind, secret, form in scanner.text(text):
                finds.append(Find(path, n, where, kind, _mask(secret), form))
            continue
        for field, leaf in _fields(rec):
            if isinstance(leaf, dict):
                try:
                    data = base64.b64decode(leaf["b64"])
                except (binascii.Error, ValueError):
                    data = str(leaf["b64"]).encode()
                hits = scanner.blob(data)
            elif isinstance(leaf, str):
                named = list(scanner.named(leaf))
                values = {secret for _, secret, _ in named}
                hits = itertools.chain(
                    (h for h in scanner.text(leaf) if not (h[0] == NAMED and h[1] in values)),
                    named,
                )
            else:
                continue
            for kind, secret, form in hits:
                find = Find(path, n, field or "(record)", kind, _mask(secret, kind), form)
                if field.endswith(COMMAND_LINE) and any(
                    (f.line, f.kind, f.masked) == (n, kind, find.masked) for f in finds
                ):
                    continue  # found in one of its words already
                finds.append(find)
        finds.extend(
            _stream_finds(scanner, rec, path, n, {(f.kind, f.masked) for f in finds if f.line == n})
        )
        cut = _cut_finds(rec, path, n)
        if cut:  # the cut credential is that find's to report (its name before it found it too)
            finds = [f for f in finds if not (f.line == n and f.kind == NAMED)]
        finds.extend(cut)
        finds.extend(_digest_finds(rec, path, n))
        finds.extend(_named_finds(rec, path, n))
        finds.extend(_header_finds(rec, path, n))
    return finds


#: The schemes a credential header's value may start with (its credential follows).
_SCHEMES = ("bearer ", "basic ", "token ", "digest ", "aws4-hmac-sha256 ")


def _url_path(url: str) -> str:
    """The path of a recorded URL (the whole text when it has no scheme). One ``urlsplit`` refuses
    (``http://[::1``: a hostile file's) is still scanned: its path is what follows the authority,
    up to the query or fragment."""
    if "://" not in url:
        return url
    try:
        return urlsplit(url).path
    except ValueError:
        tail = url.split("://", 1)[1].partition("/")[2]
        return "/" + tail.split("?", 1)[0].split("#", 1)[0] if tail else ""


def _header_finds(rec: Any, path: str, n: int) -> list[Find]:
    """A header left unredacted whose name says credential (the recorder's rule:
    :func:`~cassettes.recording.header_secret`: ``X-Vault-Token``, ``PRIVATE-TOKEN``, a cookie),
    and a credential in the URL's path (``/bot<id>:<token>/``)."""
    out: list[Find] = []
    if not isinstance(rec, dict):
        return out
    url = rec.get("url")
    if isinstance(url, str):
        for secret in path_secrets(_url_path(url)):
            if "REDACTED" not in secret:
                out.append(Find(path, n, "url", "a credential in the path", _mask(secret)))
    for side in ("request", "response"):
        part = rec.get(side)
        headers = part.get("headers") if isinstance(part, dict) else None
        for pair in headers if isinstance(headers, list) else []:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], str)):
                continue
            name, value = pair
            if not isinstance(name, str) or not header_secret(name, value):
                continue
            low = value.lower()
            secret = next((value[len(s) :] for s in _SCHEMES if low.startswith(s)), value)
            if secret.strip() and REDACTED not in secret and "REDACTED" not in secret:
                where = f"{side}.headers[{clean_line(name[:60])}]"
                out.append(Find(path, n, where, f"credential header {clean_line(name[:60])!r}",
                                count(len(secret), "char")))  # fmt: skip
    return out


def _named_finds(rec: Any, path: str, n: int) -> list[Find]:
    """Values left under a credential's name in the record's JSON itself (a body stored as JSON,
    the parse of a response): the redactor masks these whatever their length. Header pairs are
    left to the scan by format and by header name."""
    out: list[Find] = []
    for v, where, _, k in walk(rec, RECORD_DEPTH):
        if (
            not isinstance(k, str)  # (a value of an object)
            or "headers" in where[:-1]
            or isinstance(v, bool)
            or not v
            or v == REDACTED
            or not isinstance(v, str | int | float)
        ):
            continue
        kind = secret_name(k)
        if kind == "always" or (kind == "if-secret" and isinstance(v, str) and looks_secret(v)):
            named = f"credential field {clean_line(k[:60])!r}"
            out.append(Find(path, n, format_path(where), named, f"{len(str(v))} chars"))
    return out


def _digest_finds(rec: Any, path: str, n: int) -> list[Find]:
    """The plain sha256 digests of unredacted values that edit marks of older looptaps kept
    (``edits[i].before_sha256`` / ``after_sha256``): a word list reverses a short one."""
    marks = rec.get("edits") if isinstance(rec, dict) else None
    out: list[Find] = []
    for i, m in enumerate(marks if isinstance(marks, list) else []):
        for k in ("before_sha256", "after_sha256"):
            if isinstance(m, dict) and isinstance(m.get(k), str):
                out.append(
                    Find(
                        path,
                        n,
                        f"edits[{i}].{k}",
                        "plain digest of an unredacted value (a word list reverses it)",
                        f"{len(m[k])} chars",
                    )
                )
    return out


def _stream_finds(
    scanner: Scanner, rec: Any, path: str, n: int, known: set[tuple[str, str]]
) -> list[Find]:
    """Secrets in a record's response stream reassembled (a key split across events), not
    already found in one piece."""
    resp = rec.get("response") if isinstance(rec, dict) else None
    body = resp.get("body") if isinstance(resp, dict) else None
    if not isinstance(body, dict):
        return []
    try:
        # (a WebSocket session's messages are one piece)
        data = b"".join(c for _, c in decode_chunks(body))
    except (CassetteError, ValueError, TypeError, binascii.Error):
        return []
    out: list[Find] = []
    for text in stream_texts(data):
        for kind, secret, form in itertools.chain(scanner.text(text), scanner.named(text)):
            if (kind, _mask(secret, kind)) not in known:
                known.add((kind, _mask(secret, kind)))
                out.append(
                    Find(path, n, "response.body (reassembled)", kind, _mask(secret, kind), form)
                )
    return out


def _cut_finds(rec: Any, path: str, n: int) -> list[Find]:
    """A credential cut short by the end of a response cut mid-way (a reset, a gzip stream
    without its end): ``authorization=Bearer sk-p`` or ``ghp_hE0V`` holds too little of the key
    for any format to find, and the redactor masks it for that (``Detector.cut_at``); so in a
    traced process's texts its tracer's bounds cut (``cut_texts``). Read in the body as
    stored, and in what a body kept compressed decodes to as far as it goes."""
    rec = rec if isinstance(rec, dict) else {}
    out: list[Find] = []
    for key, i, text in cut_texts(rec):  # (a traced process's texts its tracer's bounds cut)
        at = default_detector().cut_at(text)
        if at is not None:
            where = f"{key}[{i}] (cut short)" if i is not None else f"{key} (cut short)"
            kind = "a credential cut short by a bound"
            out.append(Find(path, n, where, kind, count(len(text) - at, "char"), "text"))
    if out:
        return out
    error, notes, resp = rec.get("transport_error"), rec.get("notes"), rec.get("response")
    notes = [x for x in notes if isinstance(x, str)] if isinstance(notes, list) else []
    if not body_cut(error if isinstance(error, str) else None, notes) or not isinstance(resp, dict):
        return []
    try:
        data = b"".join(c for _, c in decode_chunks(resp.get("body")))
    except (CassetteError, ValueError, TypeError, binascii.Error):
        return []
    for form, body in (("text", data), ("compressed", salvage(data))):
        text = body.decode("utf-8", "replace")
        at = default_detector().cut_at(text) if body else None
        if at is not None:
            where = "response.body (cut short)"
            kind = "a credential cut short by the end of a cut body"
            return [Find(path, n, where, kind, count(len(text) - at, "char"), form)]
    return []


def scan_file(path: str | Path, extra_patterns: Iterable[str] = ()) -> list[Find]:
    """Every secret in the cassette at ``path`` (a gzip-compressed one, LangChain's ``.yaml.gz``,
    read as it decompresses, as far as it goes). Raises ``OSError`` if it cannot be read."""
    p = Path(path)
    with open_regular(p) as f:
        magic = f.read(16)
        if magic.startswith(b"SQLite format 3\x00") or magic[8:12] == b"DUCK":
            return scan_lines(_database_lines(p, magic[8:12] == b"DUCK"), str(p), extra_patterns)
        f.seek(0)
        if f.read(2) == b"\x1f\x8b":
            f.seek(0)
            inner = salvage(f.read())
            if inner:
                return scan_lines(inner.splitlines(), str(p), extra_patterns)
        f.seek(0)
        if _plain_text(p):
            return _scan_text(f, str(p), extra_patterns)
        return scan_lines((line.rstrip(b"\r\n") for line in f), str(p), extra_patterns)


#: What is read of a text file (a log, a working tree's contents kept) at a time, and how much of
#: the last piece is read again with the next (a PEM key across their border is read whole).
_PIECE = 1 << 20
_OVERLAP = 16 << 10


def _plain_text(p: Path) -> bool:
    """Whether ``p`` is a text looptap wrote that is no cassette: an agent's output kept
    (``*.log``), a ``why`` edit (``*.txt``), a working tree's contents kept (``RUN.jsonl.files/``):
    read as one text, not line by line (a PEM key spans lines)."""
    return p.suffix.lower() in (".log", ".txt") or p.parent.name.endswith(".files")


def _scan_text(f: Any, path: str, extra_patterns: Iterable[str]) -> list[Find]:
    """Every secret in the text of ``f``, a piece at a time; each find at the line it starts."""
    scanner = Scanner(extra_patterns)
    finds: list[Find] = []
    seen: set[tuple[str, str, str]] = set()
    lines_before = 0
    tail = b""
    while piece := f.read(_PIECE):
        data = tail + piece
        text = data.decode("utf-8", "replace")
        for kind, secret, form in scanner.text(text):
            at = text.find(secret)
            key = (kind, secret, form)
            if key in seen:
                continue
            seen.add(key)
            line = lines_before + text.count("\n", 0, max(at, 0)) + 1
            finds.append(Find(path, line, "(text)", kind, _mask(secret, kind), form))
        tail = data[-_OVERLAP:]
        lines_before += data[: len(data) - len(tail)].count(b"\n")
    return finds


#: The most a database's value is decompressed to (bytes), and the most rows read of a table.
_DB_VALUE = 1 << 28
_DB_ROWS = 1 << 20


def _database_lines(path: Path, duck: bool) -> Iterator[bytes]:
    """Every value of every table of a database looptap writes — a kept analysis (SQLite, its
    blocks zstd-compressed: docs/kept-analysis.md) or the fleet index (DuckDB: the fleet
    extra) — one line each, a compressed block as what it decompresses to. Raises ``OSError``
    when the file cannot be read as one (DuckDB without the fleet extra)."""
    import zstandard

    if duck:
        try:
            import duckdb
        except ImportError:
            raise OSError("reading a fleet index needs DuckDB (the fleet extra)") from None
        con: Any = duckdb.connect(str(path), read_only=True)
        query = "select table_name from information_schema.tables"
    else:
        import sqlite3

        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        query = "select name from sqlite_master where type = 'table'"
    try:
        for (table,) in con.execute(query).fetchall():
            rows = con.execute(f'select * from "{str(table).replace(chr(34), "")}"')
            while batch := rows.fetchmany(256):
                for v in (v for row in batch for v in row):
                    if isinstance(v, bytes):
                        try:
                            v = zstandard.ZstdDecompressor().decompress(
                                v, max_output_size=_DB_VALUE
                            )
                        except zstandard.ZstdError:
                            pass
                        yield from v.splitlines()
                    elif v is not None:
                        yield from str(v).encode("utf-8", "surrogateescape").splitlines()
    except Exception as exc:  # (sqlite3's and duckdb's errors: a file that is not one)
        raise OSError(f"cannot read it as a database: {exc}") from None
    finally:
        con.close()


def load_config_patterns(config: str | Path | None) -> list[str]:
    """Patterns from a TOML file: ``patterns`` at the top, under ``[verify]`` or under
    ``[tool.looptap.verify]``. Without ``config``, ``./pyproject.toml``'s ``[tool.looptap.verify]``
    (if any). Raises ``OSError`` / ``ValueError`` for an unreadable or malformed file."""
    if config is None:
        default = Path("pyproject.toml")
        if not default.is_file():
            return []
        config = default
    try:  # bounded in size and depth, one line naming the file (storage, bounds)
        doc = parse_toml(read_config(config, "the verify patterns' file"))
    except CassetteIOError as exc:
        raise ValueError(str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{config}: not valid TOML: {exc}") from None
    looptap = doc.get("tool", {}).get("looptap", {})
    looptap = looptap if isinstance(looptap, dict) else {}
    # The recorder's own patterns ([tool.looptap.redact]) are scanned for too: what it was told to
    # mask must not be in the file.
    redact = looptap.get("redact")
    out: list[str] = []
    if isinstance(redact, dict) and "patterns" in redact:
        pats = redact["patterns"]
        if not isinstance(pats, list) or not all(isinstance(p, str) for p in pats):
            raise ValueError(
                f"{config}: [tool.looptap.redact] 'patterns' must be a list of strings"
            )
        out += pats
    for section in (looptap.get("verify"), doc.get("verify"), doc):
        if isinstance(section, dict) and "patterns" in section:
            pats = section["patterns"]
            if not isinstance(pats, list) or not all(isinstance(p, str) for p in pats):
                raise ValueError(f"{config}: 'patterns' must be a list of strings")
            return [*out, *pats]
    return out


def cmd_verify(args: argparse.Namespace) -> int:
    p = ""
    try:
        patterns = [*load_config_patterns(args.config), *args.pattern]
        for p in patterns:
            UserPattern(p)
    except PatternError as exc:
        print(f"looptap: error: invalid --pattern {p[:80]!r}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except (OSError, ValueError) as exc:
        print(f"looptap: error: cannot read the verify config: {exc}", file=sys.stderr)
        return EXIT_ERROR
    found = 0
    failed = 0
    files: list[str] = []
    for given in args.files:
        if Path(given).is_dir():
            inside = _files_under(Path(given))
            if not inside and not args.quiet:
                print(
                    f"looptap: {given}: no recordings under it ({', '.join(_DIR_SUFFIXES)})",
                    file=sys.stderr,
                )
            files.extend(inside)
        else:
            files.append(given)
    for file in files:
        try:
            finds = scan_file(file, patterns)
        except OSError as exc:
            print(f"looptap: error: cannot read {file}: {exc.strerror or exc}", file=sys.stderr)
            failed += 1
            continue
        for f in finds:
            print(f)
        found += len(finds)
        if not args.quiet:
            verdict = f"{count(len(finds), 'secret')} found" if finds else "clean"
            print(f"looptap: {file}: {verdict}", file=sys.stderr)
    if failed:
        return EXIT_ERROR
    return EXIT_FOUND if found else EXIT_CLEAN


#: What ``verify DIR`` scans: recordings and what is exported from them (the same as ``import DIR``
#: reads, plus looptap's own cassettes and exports).
_DIR_SUFFIXES = (
    ".jsonl", ".yaml", ".yml", ".har", ".json", ".html", ".log", ".txt", ".sqlite", ".duckdb",
)  # fmt: skip
#: …and LangChain's gzipped cassettes.
_GZIP_SUFFIXES = (".yaml.gz", ".yml.gz")


def _files_under(root: Path) -> list[str]:
    """The recordings under ``root``, sorted; hidden directories (``.git``, ``.venv``) and
    ``node_modules`` skipped, links not followed."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "node_modules")
        for name in sorted(filenames):
            p = Path(dirpath) / name
            named = (
                p.suffix.lower() in _DIR_SUFFIXES
                or name.lower().endswith(_GZIP_SUFFIXES)
                or Path(dirpath).name.endswith(".files")  # a working tree's contents kept
            )
            if named and not p.is_symlink() and p.is_file():
                out.append(str(p))
    return out
