"""looptap's own headers (``x-looptap-…``) on a recorded flow: a fork's edit marks taken off the
request (kept only when sealed with this run's key), an upstream's response never let speak for
looptap, and what was taken or dropped read into the round trip."""

from __future__ import annotations

from typing import Any

from mitmproxy import http

from ..cassettes.wire import (
    EDIT_AUTH_HEADER,
    EDIT_HEADER,
    OWN_RESPONSE_HEADERS,
    Exchange,
    authentic,
    from_header,
)

__all__ = ["OWN_RESPONSE", "drop_own_marks", "marks_into", "take_edit_marks"]

#: The flow metadata key of a fork's edit marks, taken off the request (cassettes.wire._edit_marks).
EDITS = "looptap_edits"
#: The flow metadata key set when a request carried edit marks not sealed with this run's key.
EDITS_REFUSED = "looptap_edits_refused"
MARKS_REFUSED = "looptap_marks_refused"
#: Flow metadata set on a response the proxy made itself (a live fault, :mod:`proxy.faults`), not an
#: upstream's.
OWN_RESPONSE = "looptap_own_response"


def _has_own(headers: Any) -> bool:
    """Whether any header is named like looptap's own (``x-looptap-…``): one pass over the raw
    fields, instead of a case-insensitive lookup per name on every request and response."""
    return any(k[:10].lower() == b"x-looptap-" for k, _ in headers.fields)


def take_edit_marks(flow: http.HTTPFlow, key: str | None) -> None:
    """A fork's edit marks (:mod:`cassettes.wire._edit_marks`) are for the cassette: taken off the
    request here, before it goes upstream, whether the flow is recorded or not, and kept only
    when sealed with this run's key (its fork's replay server made them). Any other marks (a
    client sending the header itself; a run with no fork has no key) are dropped, with a
    note."""
    headers = flow.request.headers
    if not _has_own(headers):
        return
    values, seals = headers.get_all(EDIT_HEADER), headers.get_all(EDIT_AUTH_HEADER)
    for name in (EDIT_HEADER, EDIT_AUTH_HEADER):
        if name in headers:
            del headers[name]
    if len(values) == 1 and len(seals) == 1 and authentic(values[0], seals[0], key):
        flow.metadata[EDITS] = values[0]
    else:
        flow.metadata[EDITS_REFUSED] = True


def drop_own_marks(flow: http.HTTPFlow) -> None:
    """An upstream's response never speaks for looptap: ``x-looptap-fault`` would make its own
    error read as an injected one, ``x-looptap-replay: miss`` as a replay's miss (the client's
    divergence). Such headers are dropped, for the client and the cassette alike, and the round
    trip says so, unless the proxy made the response itself (a live fault, marked by
    :data:`OWN_RESPONSE`)."""
    assert flow.response is not None
    if flow.metadata.get(OWN_RESPONSE):
        return
    headers = flow.response.headers
    if not _has_own(headers):
        return
    found = [name for name in OWN_RESPONSE_HEADERS if name in headers]
    for name in found:
        del headers[name]
    if found:
        flow.metadata[MARKS_REFUSED] = found


def marks_into(ex: Exchange, metadata: dict[str, Any]) -> None:
    """looptap's own marks the flow carried: the fork's edit marks read into ``ex``, and a note for
    each mark that was dropped (not this recorder's or this fork's, or unreadable)."""
    refused = metadata.get(MARKS_REFUSED)
    if refused:
        ex.notes.append(
            f"marks: the upstream's response carried looptap's own headers ({', '.join(refused)}) "
            "that this recorder did not write; dropped"
        )
    if metadata.get(EDITS_REFUSED):
        ex.notes.append(
            "edits: the request carried edit marks that this run's fork did not make (sent by the "
            "client?); dropped"
        )
    marks = metadata.get(EDITS)
    if marks is not None:
        ex.edits = from_header(marks)
        if ex.edits is None:
            ex.notes.append("edits: the request's edit marks could not be read; dropped")
