"""A, the selected turn's API verdict: status, finish reason, usage and cost, timing, model,
errors."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from ...cassettes.analysis import ApiReport, Layer, TokenCount, Turn
from ...cassettes.analysis.dispatch import replay_miss
from ...cassettes.untrusted import clean
from ...cassettes.views import money
from ..layout import api_quiet
from ..safe import wire_line
from ._layers import LayerPane

__all__ = ["ApiPane"]


def _secs(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s"


def _n(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


class ApiPane(LayerPane):
    """A — what the API reported: status, finish reason, usage and cost, timing, model, errors."""

    LAYER: Layer = "A"
    TITLE = "A · API verdict"

    def show_turn(self, turn: Turn) -> None:
        k = turn.tokens
        out: list[RenderableType] = self._findings(turn.findings, "A")
        out.append(self._kv(_api_rows(turn)))
        verdict = _api_verdict(turn)
        if verdict is not None:
            out.append(verdict)
        if k.price_source:
            out.append(wire_line(f"price: {k.price_source}", style="dim"))
        self._set(out, turn)

    def quiet(self, turn: Turn | None) -> str:
        """No A finding, but the API answered an error (a 400 whose cause is the client's): it
        says so, never "ok"."""
        if turn is None:
            return "ok"
        return api_quiet(turn.a.status, turn.a.error is not None)


def _model_text(a: ApiReport) -> str:
    """The model that answered, and the one asked for when it differs (or only that one)."""
    model = a.model_served or "-"
    if a.model_requested and a.model_served and not a.model_served.startswith(a.model_requested):
        model = f"{a.model_served} (asked {a.model_requested})"
    elif a.model_requested and not a.model_served:
        model = f"{a.model_requested} (requested)"
    return model


def _cost_text(k: TokenCount) -> str:
    """This turn's cost and the conversation's so far (``~``: estimated; a lower bound when not
    every turn had a price)."""
    return (
        f"{money(k.cost, k.price_estimated)} · so far "
        f"{money(k.cumulative_cost, k.cumulative_estimated)}"
        f"{'' if k.cost_complete in (None, True) else ' (lower bound)'}"
        f"{' (~: estimated)' if k.price_estimated or k.cumulative_estimated else ''}"
    )


def _api_rows(turn: Turn) -> list[tuple[str, str | Text]]:
    """The A pane's table: status, finish, stream, model, usage, cost, latency, ids, rate limits."""
    a, k = turn.a, turn.tokens
    finish = f"{a.finish_reason_raw or '-'} ({a.finish_reason.value if a.finish_reason else '-'})"
    complete = "complete" if a.complete else ("TRUNCATED" if a.complete is False else "?")
    usage = (
        f"in {_n(k.input)} (uncached {_n(k.input_uncached)}, cache read {_n(k.cache_read)}, "
        f"written {_n(k.cache_write)})"
    )
    rows: list[tuple[str, str | Text]] = [
        (
            "status",
            Text(
                str(a.status or "-"), style="bold red" if (a.status or 0) >= 400 else "bold green"
            ),
        ),
        ("finish", finish),
        ("stream", f"{'streamed' if a.stream else 'json'}, {complete}"),
        ("model", _model_text(a)),
        ("input", usage),
        ("output", f"{_n(k.output)} (reasoning {_n(k.reasoning)})  [{k.source}]"),
        ("cost", _cost_text(k)),
        (
            "latency",
            f"total {_secs(a.duration)} · headers {_secs(a.ttfb)} · first token {_secs(a.ttft)}",
        ),
    ]
    if a.read in ("partial", "unread"):  # (said only when not all of it was read: issue 92)
        said = "; ".join(a.unread[:4])
        rows.append(("read", clean(f"{a.read}: {said} (no finding rests on it)")))
    if a.request_id:
        rows.append(("request id", a.request_id))
    for key, v in sorted(a.rate_limit.items()):
        rows.append((key, v))
    return rows


def _api_verdict(turn: Turn) -> Text | None:
    """Who answered when the API did not (looptap's replay), or the API's error."""
    if replay_miss(turn.findings) is not None:
        return Text(
            "answered by looptap's replay, not the API: no recorded round trip matches this "
            "request (the client's divergence: see C)",
            style="bold",
        )
    err = turn.a.error
    if err is None:
        return None
    where = "error event in the stream" if err.in_stream else f"HTTP {err.status}"
    return Text.assemble(
        (f"{where}: ", "bold red"),
        clean(f"{err.type or ''} {err.code or ''} {err.message or ''}".strip()),
    )
