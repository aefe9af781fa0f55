"""The response headers only looptap writes, and that its analysis reads as looptap's own doing:
``x-looptap-fault`` (a fault ``looptap run --fault`` or ``looptap replay --fault`` injected: its
finding is labelled injected, never the API's), ``x-looptap-replay`` (a replay's answer, or its
miss: the client's divergence, never an API error) and ``x-looptap-miss`` (the miss's note).

An upstream's response never speaks for looptap: whatever relays or records an upstream's answer
(the recorder, the replay server passing a live answer on) drops these headers from it and says so.
"""

from __future__ import annotations

__all__ = ["OWN_RESPONSE_HEADERS", "without_own"]

OWN_RESPONSE_HEADERS = ("x-looptap-fault", "x-looptap-replay", "x-looptap-miss")


def without_own(headers: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[str]]:
    """``headers`` without looptap's own response headers, and the names of those dropped."""
    kept, dropped = [], []
    for k, v in headers:
        if k.lower() in OWN_RESPONSE_HEADERS:
            if k.lower() not in dropped:
                dropped.append(k.lower())
        else:
            kept.append((k, v))
    return kept, dropped
