"""A cut answer continued by the fork (``--edit continue=N``; docs/fork.md "Continuing a cut
answer", docs/why.md): what a client that does not take an answer cut at the token cap as
complete does, made by looptap for the client.

Past the cursor, the client's request goes live as any other. When the upstream's answer is cut
by the cap (the API's own finish reason: ``length``, ``max_tokens``, ``incomplete`` with
``max_output_tokens``) and holds text only, looptap asks the model to go on, in the API's own
form (its adapter's ``Provider.replay.continuation_body``: the cut text as an
assistant message and a request for the rest, or an assistant prefill), at most N times while
the answer stays cut; then hands the client ONE answer joining the parts, in the format the
client asked for (JSON, or the API's event stream if it streamed: the adapter's
``render_answer``, the shape the replay server's rewriting faults use).

Every continuation request goes through the fork's recorder with an edit mark (``continue`` at
the request's history, its ``before`` the history the client sent), so the branch says the answer
at that turn was continued by looptap: the request the client never made is the fork's change,
never the client's or the API's. An answer that is not cut, or is cut inside a tool call (no text
to go on from), is relayed as it came.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from ... import bounds
from ...models import USAGE_COUNTS, FinishReason, NormalisedResponse, Part, Usage
from ...parsing import parse_exchange
from ...wire import Exchange, Headers, decode_chunks, header, mark
from .edits import Edit, edited_headers

if TYPE_CHECKING:
    from ...providers import Provider, Rendered

__all__ = ["Continuation", "cut_text", "joined", "parsed", "rendered_for"]

#: What a continuation asks, where the API needs words for it (not for a prefill).
PROMPT = (
    "Your previous answer was cut off at the token limit. Continue it exactly where it stopped, "
    "without repeating anything."
)
#: The request fields that hold the history a continuation extends (the mark's path).
_HISTORY = ("messages", "input")


@dataclass
class Continuation:
    """How a request sent live is continued when its answer is cut: the ``continue`` edit (its
    value: the most continuation requests per answer), the fork's cursor text (the marks'
    selector) and per-run key (the marks reach its recorder only with it), the marks of the
    request as first sent (the other edits), and the client's own body (the format it asked for)."""

    edit: Edit
    selector: str
    key: str | None
    adapter: Provider
    client_body: bytes
    marks: list[dict[str, Any]] = field(default_factory=list)
    #: Continuation requests sent for this answer (counted as they go).
    sent: int = 0
    #: Told, once the answer is joined, how many continuation requests it took (the fork's report).
    on_continued: Callable[[int], None] | None = None

    def done(self, requests: int) -> None:
        """The answer was continued in ``requests`` requests and handed to the client joined."""
        self.edit.applied += 1
        if self.on_continued is not None:
            self.on_continued(requests)

    @property
    def rounds(self) -> int:
        return int(self.edit.value)

    def request(
        self, sent_body: bytes, so_far: str, headers: Headers
    ) -> tuple[bytes, Headers, str] | None:
        """The next continuation request: its body (the request as first sent, asking the model
        to go on from ``so_far``), its headers (the marks, sealed for the recorder) and the text
        the new answer continues; ``None`` when the API has no form for it."""
        doc = bounds.loads_or_none(sent_body)
        if not isinstance(doc, dict):
            return None
        made = self.adapter.replay.continuation_body(doc, so_far, PROMPT)
        if made is None:
            return None
        body, continues = made
        where = next((k for k in _HISTORY if k in body and body.get(k) is not doc.get(k)), None)
        if where is None:
            return None
        client = bounds.loads_or_none(self.client_body)
        before = copy.deepcopy(client.get(where) if isinstance(client, dict) else None)
        marks = [m for m in self.marks if not (m.get("path") or [None])[0] == where]
        marks.append(mark(self.edit.label, self.selector, [where], before))
        self.sent += 1
        return orjson.dumps(body), edited_headers(headers, marks, self.key), continues


def parsed(
    adapter: Provider,
    method: str,
    url: str,
    request_body: bytes,
    status: int,
    headers: Headers,
    chunks: list[bytes],
) -> NormalisedResponse | None:
    """The answer ``chunks`` (as the upstream sent it, framing removed) as this API's adapter
    reads it; ``None`` when it is not a model's answer (an error, a body that cannot be read)."""
    if not 200 <= status < 300:
        return None
    body = decode_chunks([(None, c) for c in chunks], header(headers, "content-encoding")).chunks
    ex = Exchange(
        method,
        url,
        [("content-type", "application/json")],
        request_body,
        status,
        "OK",
        [(k, v) for k, v in headers if k.lower() != "content-encoding"],
        body,
    )
    rt = parse_exchange(ex)
    r = rt.response
    return r if r is not None and r.error is None else None


def cut_text(answer: NormalisedResponse) -> str | None:
    """The text of ``answer`` when the cap cut it and a continuation can go on from it (text
    only: an answer cut inside a tool call has no text to continue); else ``None``."""
    if (
        answer.finish_reason != FinishReason.TRUNCATED_LENGTH
        or answer.tool_calls
        or not answer.text
    ):
        return None
    return answer.text


def joined(
    first: NormalisedResponse, parts: list[tuple[str, NormalisedResponse]]
) -> NormalisedResponse:
    """One answer from ``first`` (the cut one) and its continuations, each with the text it
    continued (``so_far``): the text is the last ``so_far`` plus the last continuation's text; the
    parts of ``first`` that are not its text (reasoning) kept before it, the last part's tool
    calls after it; the finish reason the last part's; the usage the sum of all."""
    so_far, last = parts[-1]
    text = so_far + last.text
    kept = [p for p in first.parts if p.kind not in ("text", "tool_call")]
    calls = [p for p in last.parts if p.kind == "tool_call"]
    return NormalisedResponse(
        id=first.id,
        model=first.model or last.model,
        parts=[*kept, Part(kind="text", text=text), *calls],
        finish_reason_raw=last.finish_reason_raw,
        finish_reason=last.finish_reason,
        usage=_summed([first, *(r for _, r in parts)]),
        complete=True,
    )


def _summed(answers: list[NormalisedResponse]) -> Usage | None:
    usages = [a.usage for a in answers if a.usage is not None]
    if not usages:
        return None
    out: dict[str, Any] = {}
    for name in USAGE_COUNTS:
        got = [v for u in usages if (v := getattr(u, name)) is not None]
        out[name] = sum(got) if got else None
    return Usage.model_validate(out)


def rendered_for(
    adapter: Provider, target: str, client_body: bytes, answer: NormalisedResponse
) -> Rendered | None:
    """``answer`` in the format the client's request asked for (its event stream when it
    streamed), as this API sends it; ``None``: the API has no such form here."""
    doc = bounds.loads_or_none(client_body)
    url = urlsplit(target)
    return adapter.replay.render_answer(answer, adapter.is_stream(url, doc), url, doc)
