"""Files of round trips, in private modules behind this façade (the names below are its whole
surface, pinned by tests/cassettes/test_storage_surface.py):

- the cassette's record format and migrations (``_codec``), its fields checked (``_validation``),
  request histories stored as deltas of earlier ones (``_delta``);
- appends and forgiving reads of a whole file (``_store``), the offset index for incremental
  reading of large files (``_index``) and the one reader of a cassette's records built on it
  (``_source``);
- vcrpy cassettes (``_vcr``), mitmproxy flow files (``_mitmflow``) and the paths looptap writes
  (``_paths``).

Plain imports: ``show`` and ``replay`` load all but ``_vcr`` and ``_dirs`` anyway, and ``_vcr``
loads PyYAML only when it reads a cassette.
"""

from __future__ import annotations

from ._codec import (
    FORMAT_VERSION,
    decode_chunks,
    depth_safe_record,
    dumps_record,
    exchange_to_record,
    header_record,
    record_to_exchange,
)
from ._delta import HistoryEncoder
from ._dirs import check_dir
from ._gate import LINE, Redacted, copy_sealed, sealed, write_sealed
from ._index import BLOCK, BODY_CACHE, SHELL_PLACES, RecordIndex, shell_line
from ._mitmflow import is_flow_file, load_flows, read_flows, tnetstring_pop
from ._paths import (
    FileId,
    Target,
    UnsafePath,
    check_input,
    check_target,
    describe,
    open_append,
    process_start,
    read_config,
    read_input,
    reclaim_staged,
    remove_if_same,
    same_path,
    staged,
    write_new,
    write_plain,
)
from ._source import RecordSource
from ._store import (
    CassetteFile,
    Problem,
    RecordFile,
    being_written,
    is_cassette,
    open_regular,
    private_open,
    read_header,
    read_records,
    write_private,
)
from ._vcr import load_vcr, read_vcr

__all__ = [
    "BLOCK",
    "BODY_CACHE",
    "FORMAT_VERSION",
    "LINE",
    "SHELL_PLACES",
    "CassetteFile",
    "FileId",
    "HistoryEncoder",
    "Problem",
    "RecordFile",
    "RecordIndex",
    "RecordSource",
    "Redacted",
    "Target",
    "UnsafePath",
    "being_written",
    "check_dir",
    "check_input",
    "check_target",
    "copy_sealed",
    "decode_chunks",
    "depth_safe_record",
    "describe",
    "dumps_record",
    "exchange_to_record",
    "header_record",
    "is_cassette",
    "is_flow_file",
    "load_flows",
    "load_vcr",
    "open_append",
    "open_regular",
    "private_open",
    "process_start",
    "read_config",
    "read_flows",
    "read_header",
    "read_input",
    "read_records",
    "read_vcr",
    "reclaim_staged",
    "record_to_exchange",
    "remove_if_same",
    "same_path",
    "sealed",
    "shell_line",
    "staged",
    "tnetstring_pop",
    "write_new",
    "write_plain",
    "write_private",
    "write_sealed",
]
