"""Writer's completion stream (``/v1/completions`` with ``stream``): every event a ``{"value":
str}`` chunk, no ``[DONE]`` and no terminal event (:mod:`cassettes.providers.writer`). Read here,
apart from the Writer adapter, because OpenAI Completions hands such streams over as well."""

from __future__ import annotations

from typing import Any

from cassettes.models import NormalisedResponse, Part
from cassettes.providers._base import error_from_body, json_events
from cassettes.providers._parts import StreamParts
from cassettes.wire.framing import Framed

__all__ = ["is_value_stream", "value_stream"]


def is_value_stream(framed: Framed) -> bool:
    """Every JSON event of the stream is Writer's ``{"value": str}`` completion chunk."""
    seen = False
    for name, ev in json_events(framed):
        if name == "[DONE]":
            return False
        if not (isinstance(ev, dict) and isinstance(ev.get("value"), str) and "choices" not in ev):
            return False
        seen = True
    return seen


class _ValueStream(StreamParts):
    payloads = StreamParts.every_event

    def on(self, name: str | None, ev: Any) -> None:
        if isinstance(ev, dict) and isinstance(ev.get("value"), str):
            self.text("text", ev["value"])
        elif isinstance(ev, dict) and ev.get("error") is not None:
            self.error = error_from_body(ev, None, in_stream=True)
        else:
            self.unparsed()

    def close(self) -> NormalisedResponse:
        text = self.joined("text")
        resp = self.finish(parts=[Part(kind="text", text=text)] if text else [])
        if resp.error is None:
            resp.complete = None  # the API sends no terminal event: a whole stream cannot be told
            resp.notes.append(
                "Writer completion stream: the API sends no finish reason and no end event, so "
                "completeness cannot be told"
            )
        return resp


def value_stream(framed: Framed) -> NormalisedResponse:
    """A stream of Writer ``{"value"}`` completion chunks → the answer."""
    return _ValueStream().read(framed)
