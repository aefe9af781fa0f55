"""cassettes.reading is one façade over private modules (issue 56): its exported names are pinned
here, as httpx pins its ``__all__``, so that a name added to or dropped from the surface is a
decision seen in review, not a side effect."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.reading as reading

EXPORTED = [
    "APPLICATION_ID", "CHECKPOINT", "MAX_CONTINUATION", "SCHEMA",
    "Batch", "ParseStore", "Pieces", "Relation", "Run", "RunReader", "RunTooLargeError",
    "TurnStore",
    "analyser_digest", "branch_line", "branch_origin", "cassette_of", "compressor",
    "decompressor", "detect", "first_turn", "fork_notes", "header_time", "keep", "locate",
    "location", "memory_budget", "open_run", "origin_fields", "origin_in", "origin_of", "packed",
    "read_entries", "relate", "show_objects", "show_pairs", "sniff", "timeline",
    "with_notes", "within_budget",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    assert reading.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_exported_name_resolves_and_every_module_is_private() -> None:
    for name in reading.__all__:
        assert getattr(reading, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(reading.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.reading.{m}")


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        reading.nothing_here  # noqa: B018
    except AttributeError as exc:
        assert "nothing_here" in str(exc)
    else:
        raise AssertionError("looptap.cassettes.reading.nothing_here resolved")
