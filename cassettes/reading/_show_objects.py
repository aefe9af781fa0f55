"""A run's ``show --json`` objects (``looptap.roundtrip/1`` with the analysis additions,
docs/show-json.md), made in one place: ``looptap show`` prints them, ``looptap index`` takes the
fleet's rows from them, so the fleet's numbers are ``show``'s by construction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..views import (
    conversation_json,
    edits_json,
    growth_row,
    mcp_link_json,
    roundtrip_json,
    shell_by_call,
    shell_call_json,
    tool_call_http_json,
    tool_http_link_json,
    turn_json,
)
from ._branch import fork_notes, origin_in, tolerated_by_conversation

if TYPE_CHECKING:
    from ..parsing import RoundTrip
    from ..wire import Exchange

__all__ = ["show_objects", "show_pairs"]

#: The analysis additions of a round trip that is not a model call.
EMPTY_TURN: dict[str, Any] = {
    "conversation": None, "turn": None, "previous_seq": None, "conversation_kind": None, "conversation_parent_seq": None,  # noqa: E501
    "layers": None, "tokens": None, "findings": [],
}  # fmt: skip


def show_objects(run: Any, path: Path) -> Iterator[dict[str, Any]]:
    """The run's ``show --json`` objects (``looptap.roundtrip/1`` with the analysis), one round
    trip at a time, kept with a kept analysis: what ``show --json`` prints, for the other readers
    that must give the same numbers (``looptap index``)."""
    for v, _row in run.printed(lambda: show_pairs(run, path)):
        yield v


def show_pairs(run: Any, path: Path) -> Iterator[list[Any]]:
    """Each round trip's ``show --json`` object and its growth row, in order, made afresh."""
    turns = run.analysis.turns
    ran = {c.call_id: c for c in run.analysis.mcp_calls.values() if c.call_id and c.via == "mcp"}
    # a tool's HTTP calls, under the model's call each served (several may serve one)
    served: dict[str, list[Any]] = {}
    for c in run.analysis.mcp_calls.values():
        if c.call_id and c.via == "http":
            served.setdefault(c.call_id, []).append(c)
    # The conversations that branched from another (few): every other one is a main one. (Made for
    # text too: the printed views are kept with a kept analysis, and a later --json reads them.)
    # the shell calls looptap run's tracer linked to a process (docs/shell-file-tools.md)
    shell = shell_by_call(run.shell)
    # their findings (C, E), on the turn each is rooted at (the run's list has them already)
    shell_found: dict[int, list[Any]] = {}
    for f in run.shell.findings:
        if f.seq is not None:
            shell_found.setdefault(f.seq, []).append(f)
    # the A findings of failed API calls that are no model call (an embedding's 404): on no turn
    side_found: dict[int, list[Any]] = {}
    for f in run.analysis.findings:
        if f.seq is not None and f.conversation is None and f.turn is None:
            side_found.setdefault(f.seq, []).append(f.model_dump(mode="json"))
    branched = {c.id: c for c in run.analysis.conversations if c.parent_seq is not None}
    prefix = prefix_tolerated(path, run)
    firsts: set[str] = set()

    def rest(v: dict[str, Any]) -> list[Any]:
        """One round trip's printed view and growth row, from its own part (:func:`own_view`,
        made here or as the analysis parsed it): the rest is of the analysis only."""
        turn = turns.get(v["seq"])
        v.update(turn_json(turn) if turn is not None else EMPTY_TURN)
        if turn is None and v["seq"] in side_found:
            v["findings"] = side_found[v["seq"]]
        if turn is not None and shell_found.get(v["seq"]):
            have = {(x["code"], x.get("tool_call_id")) for x in v["findings"]}
            v["findings"] = v["findings"] + [
                f.model_dump(mode="json")
                for f in shell_found[v["seq"]]
                if (f.code, f.tool_call_id) not in have
            ]
        if turn is not None:
            parent = branched.get(turn.conversation)
            v.update(
                conversation_json(parent)
                if parent is not None
                else {"conversation_kind": "main", "conversation_parent_seq": None}
            )
        link = run.analysis.mcp_calls.get(v["seq"])
        if link is not None and v.get("mcp") is not None:
            v["mcp"]["linked"] = mcp_link_json(link)
        if link is not None and v.get("tool_http") is not None:
            v["tool_http"]["linked"] = tool_http_link_json(link)
        for k, tc in enumerate(v["tool_calls"] if shell else []):
            sc = shell.get((v["seq"], tc.get("id") or f"#{v['seq']}.{k}"))
            if sc is not None:
                tc["shell"] = shell_call_json(sc)
        for tc in v["tool_calls"] if ran or served else []:
            by = ran.get(tc.get("id") or "")
            if by is not None:
                tc["mcp"] = {"seq": by.seq, "tool": by.tool, "by": by.linked_by}
            http = served.get(tc.get("id") or "")
            if http:
                tc["http"] = [tool_call_http_json(c) for c in http]
        return [v, growth_row(turn) if turn is not None else None]

    def view(ex: Exchange, rt: RoundTrip) -> list[Any]:
        """One round trip's printed view and growth row: of that round trip and the analysis
        only."""
        return rest(own_view(ex, rt))

    for made in run.each_view(view, rest):  # in order (made here, taken, or kept)
        v = made[0]
        conv = str(v.get("conversation"))
        # a branch's first turn: what its prefix tolerated
        if conv in prefix and conv not in firsts:
            firsts.add(conv)
            v["tolerated"] = prefix[conv]
        yield made


def own_view(ex: Exchange, rt: RoundTrip) -> dict[str, Any]:
    """A round trip's own part of its printed view: what its exchange and parse alone make of it
    (the rest is the analysis', :func:`show_pairs`)."""
    v = roundtrip_json(rt, ex)
    if ex.edits:
        v["edits"] = edits_json(ex.edits)  # a fork's what-if edits (docs/fork.md)
    if ex.reconstructed:
        v["reconstructed"] = ex.reconstructed  # an imported trace's (docs/interop.md)
    return v


def own_view_json(ex: Exchange, rt: RoundTrip) -> bytes | None:
    """:func:`own_view` as JSON, kept as the analysis parses the round trip (a reader's
    :class:`~._stores.OwnViews`), when that JSON reads back as the very same values (no tuple,
    no non-finite float, no key that is not a string, no integer past 64 bits); else ``None``
    (the printing pass makes it again). One that raises raises there, as it did: here it is
    ``None`` and leaves the analysis as it was."""
    try:
        v = own_view(ex, rt)
        data = orjson.dumps(v)
    except Exception:  # (the pass that makes it again raises it there, as it did)
        return None
    return data if orjson.loads(data) == v else None


def prefix_tolerated(path: Path, run: Any) -> dict[str, list[dict[str, Any]]]:
    """For a fork's branch: per conversation, what its prefix tolerated (docs/fork.md)."""
    if origin_in(run.header) is None:
        return {}
    notes = fork_notes(path)["tolerated"]
    return (
        tolerated_by_conversation(notes, [str(c.id) for c in run.analysis.conversations])
        if notes
        else {}
    )
