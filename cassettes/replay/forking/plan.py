"""A fork's plan: what ``looptap run --from`` decided once, in its own process, handed to its replay
server (``looptap replay RUN --fork-plan FILE``) as one JSON file: where the cursor falls in the
run (the first recorded round trip at it, per conversation), the edits as read (their texts, and
the value each target had where the recording first sends it), the model, the live upstreams, how
the prefix is matched and the rule flags, the most requests it may send live, and the private
files the replay server writes back.

The file is versioned (:data:`VERSION`), bounded (:data:`MAX_BYTES`) and checked field by field
when read: a file that is not a plan is one line (:class:`PlanError`), never a traceback. The
fork's per-run key for its edit marks is not in it (a secret never reaches a file): it stays in
the replay server's environment (:data:`cassettes.wire.KEY_ENV`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from ...errors import CassetteError
from ...storage import open_regular, write_private
from ..live.edits import Edit
from .cursor import Cursor, live_router
from .limit import Limit
from .placement import CursorSpec

__all__ = ["MAX_BYTES", "RULES", "VERSION", "ForkPlan", "PlanError", "read_plan"]

#: The plan's format; a replay server refuses any other.
VERSION = 1
#: The rule flags a fork hands on (each an ``argparse`` destination of ``looptap replay``).
RuleName = Literal["ignore", "substitute", "volatile_tool"]
RULES: tuple[RuleName, ...] = ("ignore", "substitute", "volatile_tool")
#: The largest plan written or read (the edit texts are most of it: at most 8 MiB each).
MAX_BYTES = 64 << 20


class PlanError(CassetteError, ValueError):
    """A fork plan that cannot be written or read (one line)."""


@dataclass
class ForkPlan:
    """See the module docstring. ``starts``: (conversation, the seq of its first recorded round
    trip at the cursor), per conversation (none at ``@divergence``: placed as each conversation
    diverges)."""

    cursor: CursorSpec
    starts: list[tuple[str | None, int]] = field(default_factory=list)
    #: API name → the base URL requests of that API go to past the cursor.
    live: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    edits: list[Edit] = field(default_factory=list)
    #: Per edit (its label): the value its target had where the recording first sends it.
    recorded_values: dict[str, Any] = field(default_factory=dict)
    prefix: Literal["strict", "tolerant"] = "strict"
    #: ``False``: the prefix compared as sent (``--no-volatile``).
    volatile: bool = True
    #: The rule flags given, each flag's values.
    rules: dict[RuleName, list[str]] = field(default_factory=dict)
    #: The live upstreams are the fork's looptap recorders (edit marks sealed with the run's key).
    live_recorder: bool = False
    #: A tool's HTTP call the recording does not answer goes to its live host (``False``: it
    #: fails, ``looptap run --from … --tools-offline``).
    live_tools: bool = True
    #: The fork's recorder's forward proxy (``http://127.0.0.1:PORT``): a tool's request that goes
    #: live is sent through it, so the branch records it as ``looptap run`` records a tool's
    #: HTTP (``None``: straight to its host, unrecorded).
    tool_proxy: str | None = None
    #: The CA the fork's recorder intercepts TLS with (a file): an HTTPS tool's live request is
    #: tunnelled through ``tool_proxy`` trusting it, so the branch records it too.
    tool_proxy_ca: str | None = None
    #: Where the replay server writes what it tolerated, and what the client sent on a miss.
    tolerated_out: str | None = None
    sent_out: str | None = None
    #: The most requests sent live (``looptap run --from … --max-requests``; ``None``: no limit).
    max_requests: int | None = None
    version: int = VERSION

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
            limit=Limit(self.max_requests),
        )

    def write(self, path: Path) -> None:
        """The plan as JSON into ``path``, a new file readable by its owner only. Raises
        :class:`PlanError` for a plan over :data:`MAX_BYTES`, :class:`OSError`."""
        data = orjson.dumps(self)
        if len(data) > MAX_BYTES:
            raise PlanError(
                f"the fork's plan would be {len(data):,} bytes, over {MAX_BYTES:,} "
                "(the --edit texts together are too large)"
            )
        write_private(path, data)


def read_plan(path: str | Path) -> ForkPlan:
    """The plan in ``path``, checked field by field (pydantic, strict); raises :class:`PlanError`
    (one line) for a file that cannot be read or is not a plan of this version."""
    from pydantic import TypeAdapter, ValidationError

    name = str(path)[:200]
    try:
        with open_regular(path) as f:
            data = f.read(MAX_BYTES + 1)
        doc = orjson.loads(data) if len(data) <= MAX_BYTES else None
    except (CassetteError, OSError, orjson.JSONDecodeError) as exc:
        raise PlanError(f"fork plan {name}: not readable as JSON ({str(exc)[:200]})") from None
    if len(data) > MAX_BYTES:
        raise PlanError(f"fork plan {name}: larger than {MAX_BYTES:,} bytes")
    try:
        version = doc.get("version") if isinstance(doc, dict) else None
        if version != VERSION:
            raise ValueError(f"version {str(version)[:20]}")
        plan: ForkPlan = TypeAdapter(ForkPlan).validate_json(data, strict=True)
    except (ValueError, ValidationError) as exc:
        why = exc.errors()[0] if isinstance(exc, ValidationError) else None
        said = f"{'.'.join(map(str, why['loc']))}: {why['msg']}" if why else str(exc)
        raise PlanError(
            f"fork plan {name}: not a plan of version {VERSION} ({said[:200]})"
        ) from None
    return plan
