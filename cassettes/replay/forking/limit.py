"""A fork's limit on what it sends live (``looptap run --from RUN@CURSOR --max-requests N``;
docs/fork.md "A limit on what a fork sends").

Every request the fork would send to a live upstream asks :meth:`Limit.take` first: the agent's
requests past the cursor (over HTTP, and each turn of a live WebSocket session), and the
continuation requests of ``--edit continue``: the requests the branch records, what ``looptap
why`` counts as a branch's ``sent`` (a tool's HTTP call is none: it is the tool's, not the
model's). Past ``N`` nothing is sent: the agent gets its API's error (status 400, an
``invalid_request_error``, never retried by the SDKs; :func:`refusal`), and the branch's fork note
says the fork stopped at the limit (:meth:`Limit.as_json`), which ``looptap why`` reads (a branch
stopped there is never judged).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...hints import count
from ...matching import Recorded, request_key
from ...net import Request
from ...providers import Provider
from ..serving.plan import Refused

__all__ = ["LIMIT_CODE", "LIMIT_STATUS", "Limit", "refusal"]

#: The status and error code of a request refused at the limit: a 400 (never retried by the SDKs,
#: unlike a 429 or a 5xx; an API's own spend limit is answered so too, WIRE.md §C.6).
LIMIT_STATUS = 400
LIMIT_CODE = "looptap_fork_limit"


@dataclass
class Limit:
    """At most :attr:`most` requests sent live (``None``: no limit); see the module docstring."""

    most: int | None = None
    #: Requests sent live so far (each :meth:`take` that allowed one).
    sent: int = 0
    #: Requests refused at the limit, and the first of them (``METHOD target``).
    refused: int = 0
    first: str | None = None

    def take(self, what: str = "") -> bool:
        """One more request sent live (counted) when the limit allows it, else ``False``: refused
        (counted, ``what`` kept for the first)."""
        if self.most is None or self.sent < self.most:
            self.sent += 1
            return True
        self.refused += 1
        if self.first is None:
            self.first = what[:200]
        return False

    def message(self) -> str:
        """What the agent is told of a request refused here."""
        return (
            f"looptap: this fork stopped at its limit of {count(self.most or 0, 'live request')} "
            "(looptap run --from ... --max-requests): the request was not sent"
        )

    def as_json(self) -> dict[str, Any] | None:
        """The fork note's ``stopped`` (``None``: nothing was refused)."""
        if not self.refused:
            return None
        return {"limit": self.most, "sent": self.sent, "refused": self.refused, "first": self.first}

    def line(self) -> str | None:
        """The fork's report line when it stopped at the limit."""
        if not self.refused:
            return None
        return (
            f"stopped at the limit: {count(self.refused, 'request')} not sent past "
            f"--max-requests {self.most} (the first: {self.first}); the agent got its API's "
            f"error {LIMIT_STATUS} ({LIMIT_CODE}), and the branch says so"
        )


def refusal(limit: Limit, req: Request, rec: Recorded | None) -> Refused:
    """How a request refused at ``limit`` is answered: its API's own error shape (the adapter's
    ``replay.error``, as each family writes an error: WIRE.md §A.6, §C.6, §D.6), status 400,
    marked not to be retried."""
    adapter = request_key(req.method, req.target, req.headers, req.body).adapter or Provider()
    text = limit.message()
    return Refused(
        LIMIT_STATUS,
        adapter.replay.error(LIMIT_STATUS, text, LIMIT_CODE),
        [*adapter.replay.error_headers(retry=False), ("x-looptap-fork", "limit")],
        f"fork: {text}",
        rec,
    )
