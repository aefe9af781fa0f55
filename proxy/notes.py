"""The notes a recorded round trip carries about what the recorder changed or dropped on its way,
worded once for both of the recorder's paths (the mitmproxy addon, :mod:`proxy.addon`, and the
fast forwarder, :mod:`proxy.forwarder`): the same traffic must give the same cassette whichever
path carried it. No mitmproxy import."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "EDITS_REFUSED",
    "EDITS_UNREADABLE",
    "MAX_REQUEST",
    "marks_refused",
    "request_cut",
    "versioned",
]

#: Bytes of a request body the recorder keeps (the size of a whole LLM request: Anthropic's limit
#: for a Messages request, OpenAI's for the files of one; larger uploads are files and batches). A
#: longer body, or one of unknown length (chunked), is streamed to the upstream as it comes instead
#: of held whole (:class:`proxy.addon.Capped`); the cassette keeps its first bytes, with a note
#: (:func:`request_cut`). Never a 413: the proxy does not break an upload the API would take.
MAX_REQUEST = 32 << 20

#: A request carried a fork's edit marks that this run's fork did not seal.
EDITS_REFUSED = (
    "edits: the request carried edit marks that this run's "
    "fork did not make (sent by the client?); dropped"
)
#: A request's (sealed) edit marks could not be read.
EDITS_UNREADABLE = "edits: the request's edit marks could not be read; dropped"


def versioned(forwarded_path: str) -> str:
    """A reverse listener put back the API's version segment the client's base URL lacked
    (:func:`cassettes.providers.versioned_path`): the cassette keeps the client's path and says
    where the request went."""
    return (
        "path: the client left out the API's version segment (its base URL lacks it); "
        f"forwarded upstream as {forwarded_path}"
    )


def request_cut(sent: int, kept: int) -> str:
    """A request body longer than :data:`MAX_REQUEST`: streamed to the upstream whole, its first
    bytes kept."""
    return (
        f"request body: {sent:,} bytes went to the upstream; the cassette keeps the first "
        f"{kept:,} (the recorder keeps at most {MAX_REQUEST >> 20} MiB of a request, cut before "
        "a quote so that no JSON string is kept in part)"
    )


def marks_refused(names: Sequence[str]) -> str:
    """An upstream's response carried looptap's own headers (:mod:`cassettes.wire.own`): dropped,
    for the client and the cassette alike."""
    return (
        f"marks: the upstream's response carried looptap's own headers ({', '.join(names)}) "
        "that this recorder did not write; dropped"
    )
