"""A's findings of a failed call (:mod:`cassettes.analysis.codes`): an HTTP error status,
a prompt the API's filter refused, an error inside a 2xx."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .. import providers
from ..models import ApiError, FinishReason
from ..parsing import RoundTrip
from ..wire import Exchange, read_miss
from . import codes as codes
from ._context import TurnContext, short
from ._model import Finding
from .dispatch import speaker

__all__ = ["check_error_in_200", "check_http_error", "rate_headers", "side_http_error"]

_OVERLOADED = (503, 529)
_RATE_HEADER = ("ratelimit", "rate-limit", "retry-after", "x-should-retry")
#: Families not judged here: the tools' side (MCP, A2A servers), and a call no adapter reads.
_NOT_AN_API = frozenset({"mcp", "a2a", "unknown"})


def rate_headers(headers: list[tuple[str, str]]) -> dict[str, str]:
    """The rate-limit headers, by lower-case name: those whose name contains ``ratelimit``,
    ``rate-limit``, ``retry-after`` or ``x-should-retry`` (generic, never per provider)."""
    return {k.lower(): v for k, v in headers if any(s in k.lower() for s in _RATE_HEADER)}


def _find_key(value: Any, key: str, depth: int = 0) -> Any:
    if depth > 6:
        return None
    if isinstance(value, dict) and key in value:
        return value[key]
    inside = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for v in inside:
        got = _find_key(v, key, depth + 1)
        if got is not None:
            return got
    return None


def _err_text(err: ApiError) -> str:
    bits = [b for b in (err.type, err.code) if b and b != str(err.status)]
    msg = (err.message or "").strip().rstrip(".")
    if len(msg) > 300:
        msg = msg[:299] + "…"
    head = f" ({', '.join(dict.fromkeys(bits))})" if bits else ""
    return f"{head}: {msg}" if msg else head


def _is_pairing(ctx: TurnContext, err: ApiError | None) -> bool:
    if err is None:
        return False
    p = providers.by_family(ctx.rt.family)
    return p is not None and p.profile.is_pairing_error(err.message)


def check_http_error(ctx: TurnContext) -> Iterator[Finding]:
    rt = ctx.rt
    status = rt.status or 0
    if status < 400:
        return
    err = rt.response.error if rt.response else None
    if _is_pairing(ctx, err):
        return  # a C finding: the client mis-paired calls and results
    if ctx.replay_miss is not None:
        return  # looptap's replay answered, not the API: C.diverged_from_recording says why
    if err is not None and err.code == "content_filter":
        yield _prompt_filtered(ctx, err, status)
        return
    yield _status_finding(status, err, ctx.turn.a.rate_limit, ctx.finding)


def side_http_error(ex: Exchange, rt: RoundTrip, seq: int) -> Finding | None:
    """The A finding of an API call that is not a model call (an embedding, a token count, an
    image, a file …) answered with an error status, as :func:`check_http_error` gives a model
    call's: by the same statuses, on no turn and no conversation (``details.operation`` names
    the call). ``None`` for a success, a call of no LLM API's, an MCP or A2A server's (a tool's
    side: their C findings) and a replay's own answer."""
    status = rt.status or 0
    if status < 400 or rt.read is None or rt.family in _NOT_AN_API or read_miss(ex) is not None:
        return None
    err = rt.response.error if rt.response else None
    rate = rate_headers(ex.response_headers)
    injected = ex.response_header("x-looptap-fault")

    def make(code: str, message: str, **details: Any) -> Finding:
        if injected:
            message = f"[injected by looptap: {injected}] {message}"
            details["injected"] = injected
        row = codes.ROWS[code]
        return Finding(
            code=code,
            layer=row.layer,
            severity=row.severity,
            message=f"{message} It answered a call that is not a model call ({rt.operation}).",
            seq=seq,
            details={**details, "operation": rt.operation, "family": rt.family},
        )

    return _status_finding(status, err, rate, make)


def _status_finding(
    status: int,
    err: ApiError | None,
    rate_limit: dict[str, str],
    make: Callable[..., Finding],
) -> Finding:
    """The finding of an error status: a 429, an overload, any other 4xx/5xx."""
    text = _err_text(err) if err is not None else ""
    if status == 429:
        return _rate_limited(err, text, rate_limit, make)
    if status in _OVERLOADED:
        return make(
            codes.OVERLOADED,
            "The service was overloaded or unavailable (HTTP "
            f"{status}){text}. Retrying later usually works.",
            status=status,
            error=err.message if err else None,
        )
    return make(
        codes.HTTP_ERROR,
        f"The API answered HTTP {status}{text or ' with no error message'}.",
        status=status,
        type=err.type if err else None,
        error_code=err.code if err else None,
        error=err.message if err else None,
    )


def _flagged(raw: object) -> list[str]:
    """The categories Azure's filter ``filtered`` or ``detected``, in either of its error shapes:
    ``innererror.content_filter_result`` (Chat Completions) or
    ``inner_error.content_filter_results`` (newer API versions, the Responses API). A category's
    verdict is an object (``{"filtered": true, …}``); a blocklist's is a list of them."""
    out: set[str] = set()
    for key in ("content_filter_result", "content_filter_results"):
        inner = _find_key(raw, key)
        for k, v in list(inner.items())[:50] if isinstance(inner, dict) else ():
            verdicts = v[:20] if isinstance(v, list) else [v]
            if any(
                isinstance(x, dict) and (x.get("filtered") is True or x.get("detected") is True)
                for x in verdicts
            ):
                out.add(str(k)[:60])
    return sorted(out)


def _carrier(ctx: TurnContext) -> tuple[str, str, str | None, str | None]:
    """What brought the newest text into the refused prompt: the newest tool result this request
    appended, else its newest user-side message (in a group chat, another agent's, by its
    ``name``). (what, the text, the call id, the tool or agent)."""
    for m in reversed(ctx.turn.c.appended):
        for part in reversed(m.parts):
            src = part.tool_result
            if src is not None:
                name = src.name or next(
                    (p.name for p in ctx.turn.c.pairings if p.call_id == src.call_id), None
                )
                what = f"the result of {name or 'a tool'} ({src.call_id or 'no id'})"
                return what, src.content, src.call_id, name
        if m.role == "user":
            text = "\n".join(p.text for p in m.parts if p.kind == "text" and p.text)
            who = speaker(m)
            return (f"agent {who!r}'s message" if who else "a user message"), text, None, who
    return "", "", None, None


def _prompt_filtered(ctx: TurnContext, err: ApiError, status: int) -> Finding:
    """A 4xx whose code is ``content_filter``: the API's filter refused the prompt. What it flagged
    (:func:`_flagged`), and the message that brought the newest text in (:func:`_carrier`), the
    likeliest way the flagged text came in."""
    flagged = _flagged(err.raw)
    what, text, call_id, name = _carrier(ctx)
    return ctx.finding(
        codes.PROMPT_BLOCKED,
        f"The API's content filter refused the prompt (HTTP {status}, content_filter)"
        + (f": flagged {', '.join(flagged)}." if flagged else ".")
        + (f" The newest text came in with {what}: {short(text, 120)!r}." if what else "")
        + " Nothing was generated.",
        grade="request refused",
        tool_call_id=call_id,
        status=status,
        flagged=flagged,
        tool=name if what.startswith("the result") else None,
        speaker=name if what.startswith("agent") else None,
        error=err.message,
    )


def _rate_limited(
    err: ApiError | None, text: str, rate_limit: dict[str, str], make: Callable[..., Finding]
) -> Finding:
    """HTTP 429, with when the API asked to be tried again (its ``retry-after`` header or the
    error's ``retryDelay``) and the rate-limit counters left."""
    after = rate_limit.get("retry-after")
    delay = _find_key(err.raw, "retryDelay") if err is not None else None
    wait = (
        f" The API asked to retry after {after} s."
        if after
        else (f" The API asked to retry in {delay}." if delay else "")
    )
    limits = {k: v for k, v in rate_limit.items() if "remaining" in k}
    return make(
        codes.RATE_LIMITED,
        f"Rate limited (HTTP 429){text}.{wait}".replace("..", "."),
        status=429,
        retry_after=after or delay,
        remaining=limits,
        error=err.message if err else None,
    )


def check_error_in_200(ctx: TurnContext) -> Iterator[Finding]:
    rt = ctx.rt
    r = rt.response
    if r is None or not (200 <= (rt.status or 0) < 300):
        return
    err = r.error
    if err is None and r.finish_reason is not FinishReason.ERROR:
        return
    if _is_pairing(ctx, err):
        return
    if err is not None:
        where = "inside the stream" if err.in_stream else "in the body"
        overloaded = "overload" in f"{err.type} {err.message}".lower()
        yield ctx.finding(
            codes.ERROR_IN_200,
            f"The API sent HTTP {rt.status} but reported an error {where}{_err_text(err)}"
            + (". The service was overloaded; a retry usually works." if overloaded else ".")
            + (" Output before the error is partial." if r.parts else ""),
            type=err.type,
            error_code=err.code,
            error=err.message,
            in_stream=err.in_stream,
        )
    else:
        yield ctx.finding(
            codes.ERROR_IN_200,
            f"The API sent HTTP {rt.status} but ended the turn with an error finish "
            f"({r.finish_reason_raw!r}).",
            finish_reason=r.finish_reason_raw,
        )
