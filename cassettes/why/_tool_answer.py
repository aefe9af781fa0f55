"""``looptap why``'s C intervention on a tool's own answer: "what if the tool had answered 200".

A tool's HTTP call that failed (``C.tool_http_error_hidden``: the client then told the model a
success, or nothing) is answered otherwise in a fork: the replay server serves the tool's recorded
calls (docs/replay.md "The tools' HTTP"), and a ``tool_answer[SEQ]=STATUS:BODY`` edit
(:mod:`cassettes.replay.live.edits`) makes the failed one answer with what the same API answered
when it succeeded elsewhere in the run: the same method, host and path, a 2xx, the call whose
query is closest. The fork's cursor is the turn that sent the result back; everything before it is
served, so the branch differs from the recording in that answer only. When no call to that API
succeeded in the run, the intervention is listed, not run (what a success says is not in the
recording).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..untrusted import clean_line
from ._intervention import Intervention

__all__ = ["tool_answer"]

#: The longest answer an edit carries inline (a larger success body is cut: listed, not run).
_MAX_BODY = 64 << 10


def tool_answer(run: Any, f: Any, seqs: list[int]) -> Intervention:
    """The C intervention for ``f`` (``C.tool_http_error_hidden`` on an opened ``run``):
    the failed tool HTTP call answered with the run's closest success of the same API."""
    assert f.conversation is not None and f.turn is not None
    seq = f.details.get("tool_http_seq")
    call = str(f.tool_call_id or "")
    found = run.by_seq(seq) if isinstance(seq, int) else None
    failed = found[0] if found is not None else None
    i = Intervention(
        "C",
        f.conversation,
        f.turn,
        f"the tool's failed HTTP call #{seq} for call {call} answered as the same API answered "
        "when it succeeded",
        "c-tool-answer",
        f.code,
        seqs=seqs,
        tag=f"{call}-{seq}",
    )
    if failed is None:
        i.missing = f"the tool's HTTP call #{seq} is not in the run"
        return i
    ok = _success_like(run.exchanges, failed)
    if ok is None:
        i.missing = (
            f"no call to {_api(failed)} succeeded in the run: what a success says is not in the "
            f"recording (a fork with --edit 'tool_answer[{seq}]=200:BODY' runs it)"
        )
        return i
    body = ok.response_body
    if len(body) > _MAX_BODY:
        i.missing = f"the success #{ok.seq} answered {len(body):,} bytes, more than an edit carries"
        return i
    i.what = clean_line(
        f"the tool's failed HTTP call #{seq} ({failed.status or 'no answer'}) for call {call} "
        f"answered {ok.status} with what #{ok.seq} got ({_api(failed)})"
    )
    i.edits = [f"tool_answer[{seq}]={ok.status}:{body.decode('utf-8', 'replace')}"]
    i.evidence = f"#{ok.seq} {ok.method} {_api(ok)} → {ok.status}"
    apart = _apart(failed, ok)
    if apart:
        i.what += f": an answer to another query ({apart})"
        i.caveat = (
            f"the answer put in is #{ok.seq}'s, to another query ({apart}), not what the failed "
            "call would have got: no flip does not rule the tool's failure out (a fork with "
            f"--edit 'tool_answer[{seq}]=200:BODY', the right body, tests it)"
        )
    return i


def _apart(failed: Any, ok: Any) -> str:
    """How the success's request differs from the failed one's (query parameters, body), said;
    empty when they asked the same."""
    asked = dict(parse_qsl(urlsplit(failed.url).query))
    got = dict(parse_qsl(urlsplit(ok.url).query))
    keys = sorted(k for k in set(asked) | set(got) if asked.get(k) != got.get(k))
    said = [f"{k}={_short(got.get(k))}, not {_short(asked.get(k))}" for k in keys[:3]]
    if failed.request_body != ok.request_body:
        said.append("another request body")
    return clean_line("; ".join(said))


def _api(ex: Any) -> str:
    u = urlsplit(ex.url)
    return clean_line(f"{u.netloc}{u.path}")[:200]


def _success_like(exchanges: Any, failed: Any) -> Any:
    """The run's tool HTTP call to the same method, host and path that got a 2xx, its query
    closest to the failed one's (fewest parameters apart; the earliest of equals)."""
    want = urlsplit(failed.url)
    asked = set(parse_qsl(want.query))
    best: tuple[int, int, Any] | None = None
    for ex in exchanges:
        if not ex.tool or ex.status is None or not 200 <= ex.status < 300 or ex is failed:
            continue
        u = urlsplit(ex.url)
        if ex.method != failed.method or (u.netloc, u.path) != (want.netloc, want.path):
            continue
        apart = len(asked ^ set(parse_qsl(u.query)))
        if best is None or (apart, ex.seq) < best[:2]:
            best = (apart, ex.seq, ex)
    return best[2] if best is not None else None


def _short(value: str | None) -> str:
    return repr(clean_line(value or "")[:40])
