"""Request keys: what of a request the replay matcher compares.

A request is reduced to a :class:`RequestKey`: method, path, query (credentials dropped) and the
body. JSON bodies compare semantically (key order ignored, list order kept, but a group of tool
results answering one turn's calls is written in its calls' order, whatever order the client
appended it in) after the volatile values are normalised: ids the provider adapter names as made up
per run (tool-call ids …) become ``<id:1>``, ``<id:2>`` … in order of first appearance; ISO-8601
timestamps become ``<timestamp>``; a multipart boundary becomes ``<boundary>``; with a
:class:`~cassettes.matching.VolatileSpans`, the volatile spans inside the body's strings become
``<date>``, ``<uuid:1>``, ``<cwd>`` … (each kept, with its JSON path, in :attr:`RequestKey.spans`);
with :class:`~cassettes.matching.Rules`, the user's ignored paths, substitutions and volatile
tools' results too. Headers are ignored except, in strict mode, the few an adapter names as
changing what the API does. :mod:`cassettes.matching` matches on them.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlsplit

import orjson

from .. import bounds, providers
from ..recording import Redactor
from ..wire import Headers, header
from ._rules import Rules, Substitution, substitute
from ._volatile import IGNORED, Numbering, Span, VolatileSpans

__all__ = ["AsRecorded", "RequestKey", "bare_text", "request_key", "tool_host"]

_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
_BOUNDARY = re.compile(r"boundary=\"?([^\";]+)\"?", re.I)


@dataclass
class RequestKey:
    """A request reduced to what matching compares."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    #: The normalised JSON body, or the body bytes (boundary normalised) when it is not JSON.
    body: Any
    is_json: bool
    #: The body as sent (JSON), each group of tool results answering one turn's calls in its
    #: calls' order (as compared: the paths of a diff index it), for the layer attribution of a
    #: diff.
    raw: Any
    #: ``<id:N>`` placeholder → the id it replaced.
    ids: dict[str, str]
    url: SplitResult
    adapter: providers.Provider | None
    headers: Headers = field(default_factory=list)
    #: What the volatile-span detectors replaced in the body (``request_key(volatile=…)``), in
    #: body order: the original of every ``<date>``, ``<uuid>`` … the compared body holds.
    spans: tuple[Span, ...] = ()
    #: A tool's HTTP call's host (``host:port``, lowercase): compared too, as vcrpy does (a
    #: model call is matched by what it is, wherever it went: empty).
    host: str = ""

    @property
    def digest(self) -> bytes:
        body = orjson.dumps(self.body, option=orjson.OPT_SORT_KEYS) if self.is_json else self.body
        parts = [self.method.encode(), self.path.encode(), repr(self.query).encode(), body]
        if self.host:
            parts.insert(0, b"tool " + self.host.encode())
        # A ``<date>`` the text held as such is not a date a detector replaced; an ignored key
        # leaves nothing in the body (its presence is ignored too), so it is not counted.
        marked = sorted((repr(s.path), s.detector) for s in self.spans if s.detector != IGNORED)
        if marked:
            parts.append(repr(marked).encode())
        return b"\0".join(parts)

    @property
    def target(self) -> str:
        return self.path + ("?" + "&".join(f"{k}={v}" for k, v in self.query) if self.query else "")

    def history_key(self) -> str | None:
        if self.adapter is None or not isinstance(self.raw, dict):
            return None
        return self.adapter.history_key(self.raw)

    def parsed(self, hkey: str | None = None, item: Any = None) -> Any:
        """The body as its adapter reads it (with ``hkey``: with the history item ``item`` alone in
        its history); ``None`` when there is no adapter or it cannot read it."""
        if self.adapter is None or not isinstance(self.raw, dict):
            return None
        try:
            body = self.raw if hkey is None else {**self.raw, hkey: [item]}
            return self.adapter.parse_request(body, self.url)
        except Exception:  # an item or body the adapter cannot read
            return None


#: Content types of a lone text part that is the same as the bare string (``"content": "x"``).
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
#: Fields that take a string or a list of content parts.
_CONTENT_FIELDS = frozenset({"content", "system"})


def _normalise(
    value: Any,
    ids: set[str],
    placeholders: dict[str, str],
    drop: frozenset[str] = frozenset(),
    free: frozenset[str] | None = None,
    found: _Found | None = None,
    path: tuple[str | int, ...] = (),
) -> Any:
    """The body as compared. With ``free`` (an adapter's free-form fields: the API's semantics
    are known), what the API treats as the same request is written one way: a ``null`` field is
    an absent one, and a content list that is one plain text part is its string; inside a
    free-form field (a tool's schema, a call's input) nothing is rewritten but the ids and, with
    ``found``, the volatile spans (noted in it, with their ``path``)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k in drop or (free is not None and v is None):
                continue
            inner = None if free is None or k in free else free
            nv = _normalise(
                v, ids, placeholders, drop, inner, found, (*path, k) if found is not None else path
            )
            if inner is not None and k in _CONTENT_FIELDS:
                nv = bare_text(nv)
            out[k] = nv
        return out
    if isinstance(value, list):
        if found is None:
            return [_normalise(v, ids, placeholders, drop, free) for v in value]
        return [
            _normalise(v, ids, placeholders, drop, free, found, (*path, i))
            for i, v in enumerate(value)
        ]
    if isinstance(value, str):
        return _normalised_text(value, ids, placeholders, found, path)
    return value


def _normalised_text(
    value: str,
    ids: set[str],
    placeholders: dict[str, str],
    found: _Found | None,
    path: tuple[str | int, ...],
) -> str:
    """A string of the body as compared (see :func:`_normalise`): a volatile id as its
    placeholder, a timestamp as ``<timestamp>``, with ``found`` its volatile spans written as
    theirs."""
    if value in ids:
        ph = placeholders.get(value)
        if ph is None:
            ph = placeholders[value] = f"<id:{len(placeholders) + 1}>"
        return ph
    if _TIMESTAMP.match(value):
        if found is not None:
            found.spans.append(Span(path, "timestamp", value))
        return "<timestamp>"
    if found is not None:
        return found.normalise(value, path)
    return value


class _Found:
    """The volatile spans of one body, found as it is normalised (ids, uuids, temp directories
    and ports numbered across the whole body: :data:`cassettes.matching._volatile.NUMBERED`), and
    the user's substitutions applied first (each match a span named after its rule)."""

    __slots__ = ("numbers", "spans", "subs", "volatile")

    def __init__(
        self, volatile: VolatileSpans | None, subs: list[Substitution] | None = None
    ) -> None:
        self.volatile = volatile
        self.subs = subs or []
        self.spans: list[Span] = []
        self.numbers = Numbering()

    def normalise(self, text: str, path: tuple[str | int, ...]) -> str:
        if self.subs:
            text, subbed = substitute(self.subs, text, path)
            self.spans.extend(subbed)
        if self.volatile is None or (
            path and isinstance(path[-1], str) and "version" in path[-1].lower()
        ):
            return text  # a dated version (MCP's protocolVersion "2025-11-25") is what it says
        out, found = self.volatile.normalise(text, self.numbers)
        self.spans.extend(Span(path, d, t) for d, t in found)
        return out


def bare_text(content: Any) -> Any:
    """``[{"type": "text", "text": "x"}]`` (nothing else in the part) → ``"x"``."""
    if isinstance(content, list) and len(content) == 1:
        part = content[0]
        if (
            isinstance(part, dict)
            and part.get("type") in _TEXT_PARTS
            and isinstance(part.get("text"), str)
            and set(part) == {"type", "text"}
        ):
            return part["text"]
    return content


def _without_defaults(body: Any, defaults: tuple[tuple[str, Any], ...]) -> Any:
    """The body without top-level fields at their documented default (``"stream": false``)."""
    if not defaults or not isinstance(body, dict):
        return body
    at_default = {k for k, v in defaults if k in body and body[k] == v and type(body[k]) is type(v)}
    return {k: v for k, v in body.items() if k not in at_default} if at_default else body


def tool_host(url: str) -> str:
    """The ``host:port`` a tool's HTTP call went to (the scheme's port when none is written),
    lowercase: what of its URL a tool call's key adds to a model call's."""
    try:
        u = urlsplit(url)
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        return ""
    host = (u.hostname or "").lower()
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class AsRecorded:
    """The recorder's redaction, run on each request before its key is made, recorded and live
    alike: the matcher ignores exactly what the recorder redacted, by the same rules
    (:class:`~cassettes.recording.Redactor`: names by class, values by format, every body's
    content type), so a redacted call replays. A recorded request is already so (the redaction
    is idempotent); a live one becomes what its recording holds. One per matcher: what it learns
    from one request's credentials is masked in the next, as in the run that was recorded.
    Thread-safe."""

    def __init__(self) -> None:
        try:  # the project's extra names and patterns, as `looptap run` read them
            self._redactor = Redactor.configured()
        except ValueError:  # (a bad table is said where the recorder reads it)
            self._redactor = Redactor()
        self._lock = threading.Lock()

        #: Whether the last call changed the request (what :func:`index_of` keeps per recorded
        #: round trip: one its load-time redaction left as it was is not redacted again).
        self.changed = False

    def __call__(
        self, url: str, headers: Headers, body: bytes, parsed: Any
    ) -> tuple[str, bytes, Any, frozenset[str]]:
        """The request as its recording holds it, and the names of the query parameters the
        recorder redacted by name (:meth:`~cassettes.recording.Redactor.query_names`)."""
        with self._lock:
            out_url, out, masked = self._redactor.request(url, headers, body, parsed)
            self.changed = out_url != url or out is not body
            return out_url, out, masked, Redactor.query_names(url)


def request_key(
    method: str,
    url: str,
    headers: Headers,
    body: bytes,
    parsed: Any = None,
    volatile: VolatileSpans | None = None,
    rules: Rules | None = None,
    redacted: AsRecorded | None = None,
) -> RequestKey:
    """Normalise one request for matching (``parsed``: the body's JSON when already at hand).
    With ``volatile``, the strings of a JSON body have their volatile spans (dates, ids, temp
    paths …: :mod:`cassettes.matching`) written as placeholders too, each kept in
    :attr:`RequestKey.spans`; without, they compare as sent. With ``rules``, the user's ignored
    paths, substitutions and volatile tools' results are written out as well (each a span too).
    With ``redacted``, the request is first redacted as the recorder redacts (:class:`AsRecorded`).
    """
    names = None
    if redacted is not None:
        url, body, parsed, names = redacted(url, headers, body, parsed)
    elif "?" in url:
        names = Redactor.query_names(url)
    try:
        u = urlsplit(url)
    except ValueError:
        u = urlsplit("")
    # a parameter the recorder redacts by its name (the redactor says which) is not compared,
    # its presence included: a replay run without the credential (none set, or another one)
    # still matches its recording; one redacted by its value's format only is compared
    query = tuple(
        sorted(p for p in parse_qsl(u.query, keep_blank_values=True) if p[0] not in (names or ()))
    )
    raw = parsed
    if raw is None and body:
        try:
            raw = bounds.loads(body)
        except orjson.JSONDecodeError:
            raw = None
    if raw is None:
        return RequestKey(
            method.upper(),
            u.path,
            query,
            _opaque_body(headers, body),
            False,
            None,
            {},
            u,
            None,
            list(headers),
        )
    adapter = providers.detect(method.upper(), u, raw)
    if adapter is not None:
        raw = _in_call_order(adapter, raw)
    placeholders: dict[str, str] = {}
    family = adapter.family if adapter is not None else None
    subs = rules.substitutions(family) if rules else []
    found = _Found(volatile, subs) if volatile is not None or subs else None
    compared: Any = raw
    ruled: list[Span] = []
    if rules:
        results = _result_paths(adapter, raw, u) if rules.wants_results() else []
        compared, ruled = rules.prepare(raw, family, results)
        if found is None and ruled:
            found = _Found(None)
    norm = _normalised_json(compared, u, adapter, placeholders, found)
    if found is not None:
        found.spans[:0] = ruled
    spans = tuple(found.spans) if found is not None else ()
    return RequestKey(
        method.upper(),
        u.path,
        query,
        norm,
        True,
        raw,
        {v: k for k, v in placeholders.items()},
        u,
        adapter,
        list(headers),
        spans,
    )


def _result_paths(
    adapter: providers.Provider | None, raw: Any, u: SplitResult
) -> list[tuple[tuple[str | int, ...], str | None]]:
    """Where the body's tool results are (the adapter locates them), for a volatile-tool rule."""
    if adapter is None:
        return []
    try:
        return adapter.tool_result_paths(raw, u)
    except Exception:  # a lenient adapter that still chokes: the results are compared as sent
        return []


def _in_call_order(adapter: providers.Provider, raw: Any) -> Any:
    """The body with each group of tool results answering one turn's calls in its calls' order
    (the adapter knows its wire: :meth:`~cassettes.providers.Provider.results_in_call_order`),
    so a group compares whatever order the client appended it in."""
    try:
        return adapter.results_in_call_order(raw)
    except Exception:  # a lenient adapter that still chokes: the results are compared as sent
        return raw


def _opaque_body(headers: Headers, body: bytes) -> bytes:
    """A body that is not JSON, as compared: a multipart boundary written ``<boundary>``."""
    ctype = header(headers, "content-type") or ""
    m = _BOUNDARY.search(ctype) if ctype.lower().startswith("multipart/") else None
    return body.replace(m.group(1).encode("latin-1", "replace"), b"<boundary>") if m else body


def _normalised_json(
    raw: Any,
    u: SplitResult,
    adapter: providers.Provider | None,
    placeholders: dict[str, str],
    found: _Found | None = None,
) -> Any:
    """A JSON body as compared: the adapter's volatile ids, fields and defaults written one way."""
    # an API looptap does not read: compared as sent (only ids, times and volatile spans normalised)
    if adapter is None:
        return _normalise(raw, set(), placeholders, found=found)
    try:
        vol = {i for i in adapter.volatile_ids(raw, u) if i}
    except Exception:  # a lenient adapter that still chokes: compare the ids as they are
        vol = set()
    compared = raw
    if adapter.profile.volatile_top_fields and isinstance(raw, dict):
        compared = {k: v for k, v in raw.items() if k not in adapter.profile.volatile_top_fields}
    compared = _without_defaults(compared, adapter.profile.field_defaults)
    return _normalise(
        compared,
        vol,
        placeholders,
        adapter.profile.volatile_fields,
        adapter.profile.free_form_fields,
        found,
    )
