"""The response headers only looptap writes, and the replay miss's note one of them carries.

They are read by the analysis as looptap's own doing: ``x-looptap-fault`` (a fault ``looptap run
--fault`` or ``looptap replay --fault`` injected: its finding is labelled injected, never the
API's), :data:`REPLAY_HEADER` (a replay's answer, or its miss: the client's divergence, never an
API error) and :data:`NOTE_HEADER` (the miss's note). An upstream's response never speaks for
looptap: whatever relays or records an upstream's answer (the recorder, the replay server passing a
live answer on) drops these headers from it (:func:`without_own`) and says so.

A replay miss is looptap's own answer, not the API's: the server sends an error in the API's
shape (so the agent's SDK raises it) with :data:`REPLAY_HEADER` set to ``miss``, and
:data:`NOTE_HEADER` saying what the matcher found, as JSON (ASCII only)::

    {"closest": "conversation c1, turn 1 (seq 1)",
     "reason": "1 of 2 recorded round trips are unplayed, none is this request",
     "verdicts": [{"layer": "C", "message": "the tool result for call_A1 changed (messages[3].content)",
                   "path": "messages[3].content"}],
     "changes": ["messages[3].content: recorded \\"sunny, 21 C\\", got \\"rainy, 9 C\\""]}

— the lines the pytest failure prints, redacted and cleaned as they are
(``cassettes.matching`` writes them). The analysis turns such a round trip into the
client's divergence (layer C), never an API error, in every view: the test page, ``looptap show``,
the inspector.

The note is kept short (:data:`MAX_NOTE`): it is a response header, and clients cap the size of a
response's head (Node's at 16 KiB). A note that cannot be read (cut, forged, from an older looptap)
leaves the miss a miss, with nothing said of where it diverged.
"""  # noqa: E501

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .. import bounds
from ..untrusted import clean_line
from ._exchange import Exchange

__all__ = [
    "MAX_NOTE",
    "NOTE_HEADER",
    "OWN_RESPONSE_HEADERS",
    "REPLAY_HEADER",
    "MissNote",
    "MissVerdict",
    "read_miss",
    "without_own",
]

#: The response header the replay server marks its answers with (``miss``, ``seq=N`` …).
REPLAY_HEADER = "x-looptap-replay"
#: The response header that carries a miss's note (:class:`MissNote` as JSON).
NOTE_HEADER = "x-looptap-miss"
#: The response headers only looptap writes.
OWN_RESPONSE_HEADERS = ("x-looptap-fault", REPLAY_HEADER, NOTE_HEADER)
#: The longest note sent, in characters; verdicts and changes past it are left out.
MAX_NOTE = 4096
#: Longest text of one verdict or change line in a note.
_LINE = 300
_MOST = 8


@dataclass(frozen=True)
class MissVerdict:
    """A layer's verdict on a group of differences
    (``cassettes.matching._verdicts.Verdict``)."""

    layer: str
    message: str
    path: str | None = None


@dataclass(frozen=True)
class MissNote:
    """What the matcher said of a request it could not answer: the closest recorded turn, the
    layer verdicts and the differences (recording → this request), as shown lines."""

    closest: str | None = None
    #: Why no recorded round trip answered (``every recorded round trip is played`` …).
    reason: str | None = None
    verdicts: list[MissVerdict] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)

    def to_header(self) -> str:
        """The note as :data:`NOTE_HEADER`'s value: ASCII JSON, at most :data:`MAX_NOTE`
        characters (to fit, the verdicts after the first are left out, last first, then the
        changes after the first, then those two)."""
        verdicts = [
            {"layer": v.layer, "message": _line(v.message), "path": v.path and _line(v.path)}
            for v in self.verdicts[:_MOST]
        ]
        changes = [_line(c) for c in self.changes[:_MOST]]
        while True:
            text = json.dumps(
                {
                    "closest": self.closest and _line(self.closest),
                    "reason": self.reason and _line(self.reason),
                    "verdicts": verdicts,
                    "changes": changes,
                },
                separators=(",", ":"),
            )
            if len(text) <= MAX_NOTE or not (changes or verdicts):
                return text if len(text) <= MAX_NOTE else "{}"
            if len(verdicts) > 1 or (len(changes) <= 1 and verdicts):
                verdicts.pop()
            else:
                changes.pop()


def _line(text: str) -> str:
    text = clean_line(text)
    return text if len(text) <= _LINE else text[: _LINE - 1] + "…"


def _text(v: object) -> str | None:
    return _line(v) if isinstance(v, str) and v else None


def read_miss(ex: Exchange) -> MissNote | None:
    """The note of ``ex`` when it is a replay server's answer to a request it could not answer;
    ``None`` for any other round trip. Untrusted (a header of a cassette): read as data, bounded,
    each string cleaned."""
    if (ex.response_header(REPLAY_HEADER) or "").strip().lower() != "miss":
        return None
    raw = ex.response_header(NOTE_HEADER)
    try:
        data = bounds.loads(raw.encode()) if raw and len(raw) <= MAX_NOTE else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return MissNote()
    verdicts = [
        MissVerdict(v["layer"][:1], _text(v["message"]) or "", _text(v.get("path")))
        for v in _items(data.get("verdicts"))
        if isinstance(v, dict) and isinstance(v.get("layer"), str) and _text(v.get("message"))
    ]
    changes = [c for c in map(_text, _items(data.get("changes"))) if c]
    return MissNote(
        closest=_text(data.get("closest")),
        reason=_text(data.get("reason")),
        verdicts=verdicts,
        changes=changes,
    )


def _items(v: object) -> list[object]:
    return v[:_MOST] if isinstance(v, list) else []


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
