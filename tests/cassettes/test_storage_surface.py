"""cassettes.storage is one façade over private modules (issue 56): its exported names are pinned
here, as httpx pins its ``__all__``, so that a name added to or dropped from the surface is a
decision seen in review, not a side effect."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.storage as storage

EXPORTED = [
    "BLOCK", "BODY_CACHE", "FORMAT_VERSION", "LINE", "SHELL_PLACES",
    "CassetteFile", "FileId", "HistoryEncoder", "Problem", "RecordFile", "RecordIndex",
    "RecordSource", "Redacted", "Target", "UnsafePath",
    "being_written", "check_dir", "check_input", "check_target", "copy_sealed", "decode_chunks",
    "depth_safe_record", "describe", "dumps_record", "exchange_to_record", "header_record",
    "is_cassette", "is_flow_file", "load_flows", "load_vcr", "open_append", "open_regular",
    "private_open", "process_start", "read_config", "read_flows", "read_header", "read_input",
    "read_records", "read_vcr", "reclaim_staged", "record_to_exchange", "remove_if_same",
    "same_path", "sealed", "shell_line", "staged", "tnetstring_pop", "write_new", "write_plain",
    "write_private", "write_sealed",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    assert storage.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_exported_name_resolves_and_every_module_is_private() -> None:
    for name in storage.__all__:
        assert getattr(storage, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(storage.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.storage.{m}")
