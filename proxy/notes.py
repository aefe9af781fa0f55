"""The notes a recorded round trip carries about what the recorder changed or dropped on its way,
worded once for both of the recorder's paths (the mitmproxy addon, :mod:`proxy.addon`, and the
fast forwarder, :mod:`proxy.forwarder`): the same traffic must give the same cassette whichever
path carried it. No mitmproxy import."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["EDITS_REFUSED", "EDITS_UNREADABLE", "marks_refused", "versioned"]

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


def marks_refused(names: Sequence[str]) -> str:
    """An upstream's response carried looptap's own headers (:mod:`cassettes.wire.own`): dropped,
    for the client and the cassette alike."""
    return (
        f"marks: the upstream's response carried looptap's own headers ({', '.join(names)}) "
        "that this recorder did not write; dropped"
    )
