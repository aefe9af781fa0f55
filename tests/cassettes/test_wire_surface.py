"""cassettes.wire is one façade over private modules (issue 56): its exported names are pinned
here, so that a name added to or dropped from the surface is a decision seen in review, not a side
effect."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.wire as wire

EXPORTED = [
    "AGENT_CLOSED", "EDIT_AUTH_HEADER", "EDIT_HEADER", "KEY_ENV", "MAX_HEADER", "MAX_NOTE",
    "NEXT_TURN", "NOTE_HEADER", "OWN_RESPONSE_HEADERS", "RECORDER_MADE", "REDACTED",
    "REPLAY_HEADER", "TARGET",
    "UNSET",
    "Chunk", "Decoder", "Event", "Exchange", "Framed", "Headers", "MissNote", "MissVerdict",
    "OverBudget",
    "authentic", "body_cut", "checked", "client_body", "cut_by_client", "decode_chunks",
    "decode_exchange", "form_fields", "frame", "from_header", "header", "is_aws_eventstream",
    "item_of", "mark", "new_key", "parse_aws_eventstream", "parse_sse", "read_miss",
    "reseal_aws_eventstream", "salvage", "seal", "target_of", "to_header", "without_own",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    assert wire.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_exported_name_resolves_and_every_module_is_private() -> None:
    for name in wire.__all__:
        assert getattr(wire, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(wire.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.wire.{m}")
