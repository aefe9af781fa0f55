"""A fork's plan: what ``looptap run --from`` decided once, in its own process, handed to its replay
server (``looptap replay RUN --fork-plan FILE``) as one JSON file: where the cursor falls in the
run (the first recorded round trip at it, per conversation), the edits as read (their texts, and
the value each target had where the recording first sends it), the model, the live upstreams, how
the prefix is matched and the rule flags, and the private files the replay server writes back.

The file is versioned (:data:`VERSION`), bounded (:data:`MAX_BYTES`) and checked field by field
when read: a file that is not a plan is one line (:class:`PlanError`), never a traceback. The
fork's per-run key for its edit marks is not in it (a secret never reaches a file): it stays in
the replay server's environment (:data:`cassettes.wire.edited.KEY_ENV`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cassettes.errors import CassetteError
from cassettes.replay.forking.cursor import Cursor, CursorSpec, live_router
from cassettes.replay.live.edits import Edit

__all__ = ["MAX_BYTES", "VERSION", "ForkPlan", "PlanError", "read_plan"]

#: The plan's format; a replay server refuses any other.
VERSION = 1
#: The largest plan written or read (the edit texts are most of it: at most 8 MiB each).
MAX_BYTES = 64 << 20


class PlanError(CassetteError, ValueError):
    """A fork plan that cannot be written or read (one line)."""


@dataclass
class ForkPlan:
    """See the module docstring. ``starts``: conversation → the seq of its first recorded round
    trip at the cursor (none at ``@divergence``: placed as each conversation diverges)."""

    cursor: CursorSpec
    starts: dict[str | None, int] = field(default_factory=dict)
    #: API name → the base URL requests of that API go to past the cursor.
    live: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    edits: list[Edit] = field(default_factory=list)
    #: Per edit (its label): the value its target had where the recording first sends it.
    recorded_values: dict[str, Any] = field(default_factory=dict)
    prefix: str = "strict"
    #: ``False``: the prefix compared as sent (``--no-volatile``).
    volatile: bool = True
    #: The rule flags given (``ignore``, ``substitute``, ``volatile_tool``: each a list).
    rules: dict[str, list[str]] = field(default_factory=dict)
    #: The live upstreams are the fork's looptap recorders (edit marks sealed with the run's key).
    live_recorder: bool = False
    #: Where the replay server writes what it tolerated, and what the client sent on a miss.
    tolerated_out: str | None = None
    sent_out: str | None = None

    def router(self, edit_key: str | None) -> Cursor:
        """The fork's cursor, already placed in the run (its :meth:`Cursor.bind` only holds the
        replay server's matcher)."""
        return Cursor(
            self.cursor,
            live_router(self.live),
            model=self.model,
            edits=self.edits,
            edit_key=edit_key,
            prefix=self.prefix,
            starts=dict(self.starts),
            recorded_values=dict(self.recorded_values),
            placed=True,
        )

    def write(self, path: Path) -> None:
        """The plan as JSON into ``path``, a new file readable by its owner only. Raises
        :class:`PlanError` for a plan over :data:`MAX_BYTES`, :class:`OSError`."""
        from cassettes.storage.store import write_private

        doc = {
            "version": VERSION,
            **asdict(self),
            "cursor": self.cursor.as_json(),
            "starts": [[c, s] for c, s in self.starts.items()],
            "edits": [[e.spec, e.kind, e.key, e.value, e.selector] for e in self.edits],
        }
        data = orjson.dumps(doc)
        if len(data) > MAX_BYTES:
            raise PlanError(
                f"the fork's plan would be {len(data):,} bytes, over {MAX_BYTES:,} "
                "(the --edit texts together are too large)"
            )
        write_private(path, data)


def read_plan(path: str | Path) -> ForkPlan:
    """The plan in ``path``, checked; raises :class:`PlanError` (one line) for a file that cannot
    be read or is not a plan of this version."""
    from cassettes.storage.store import open_regular

    name = str(path)[:200]
    try:
        with open_regular(path) as f:
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise PlanError(f"fork plan {name}: larger than {MAX_BYTES:,} bytes")
        doc = orjson.loads(data)
    except (CassetteError, OSError, orjson.JSONDecodeError) as exc:
        if isinstance(exc, PlanError):
            raise
        raise PlanError(f"fork plan {name}: not readable as JSON ({str(exc)[:200]})") from None
    try:
        return _plan_of(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError(f"fork plan {name}: not a plan of version {VERSION} ({exc})") from None


def _plan_of(doc: Any) -> ForkPlan:
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise ValueError(f"version {doc.get('version') if isinstance(doc, dict) else None!r}")
    c = doc["cursor"]
    cursor = CursorSpec(
        _str(c["text"]),
        _opt(c.get("turn"), int),
        _opt(c.get("conversation"), str),
        _opt(c.get("seq"), int),
        c.get("divergence") is True,
    )
    return ForkPlan(
        cursor,
        starts={_opt(k, str): _of(s, int) for k, s in _of(doc["starts"], list)},
        live={_str(k): _str(v) for k, v in _of(doc["live"], dict).items()},
        model=_opt(doc["model"], str),
        edits=[
            Edit(_str(s), _str(k), _opt(key, str), _str(v), _opt(sel, str))
            for s, k, key, v, sel in _of(doc["edits"], list)
        ],
        recorded_values=_of(doc["recorded_values"], dict),
        prefix=_prefix(doc["prefix"]),
        volatile=_of(doc["volatile"], bool),
        rules={
            _str(k): [_str(x) for x in _of(v, list)] for k, v in _of(doc["rules"], dict).items()
        },
        live_recorder=_of(doc["live_recorder"], bool),
        tolerated_out=_opt(doc["tolerated_out"], str),
        sent_out=_opt(doc["sent_out"], str),
    )


def _of(value: Any, kind: type) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{kind.__name__} expected, not {type(value).__name__}")
    return value


def _str(value: Any) -> str:
    return str(_of(value, str))


def _prefix(value: Any) -> str:
    if value not in ("strict", "tolerant"):
        raise ValueError(f"prefix {str(value)[:40]!r}")
    return str(value)


def _opt(value: Any, kind: type) -> Any:
    return None if value is None else _of(value, kind)
