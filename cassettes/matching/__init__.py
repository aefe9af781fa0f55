"""Matching: which recorded round trip answers a request, and what of two requests legitimately
differs. One package, in private modules behind this façade (the names below are its whole
surface, pinned by tests/matching/test_surface.py):

- what is volatile between two runs of one agent (dates, clocks, ids, temp paths, the working
  directory, ports), found by shape (``_volatile``, its patterns ``_detectors``), and where a
  run was recorded (``_places``);
- the user's rules (``_rules``), read from a table or flags (``_ruletable``), the file they live
  in (``_config``) and a command's rule flags (``_userrules``);
- the request key (``_requestkey``), the JSON-path diff (``_jsondiff``), the layer a difference
  implicates (``_verdicts``);
- the recording indexed by request key, in memory or served from the offset index
  (``_recording``, ``_indexed``), the matcher that plays it (``_matcher``), a miss and its closest
  recorded turn (``_miss``), and every tolerated difference on the record (``_tolerated``).

Replay, the pytest plugin, a fork's prefix and ``looptap diff`` tolerate and explain differences the
same way through it. Names are loaded on first use (PEP 562): the pytest plugin loads in every test
session and needs only a few of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cassettes.lazy import on_first_use

# Each name with the private module that defines it, loaded on first use (PEP 562): the pytest
# plugin loads in every test session and needs only a few of them.
_MODULES = {
    "_volatile": "IGNORED Numbering Span Tolerated VolatileSpans this_process tolerated",
    "_detectors": "slug",
    "_rules": (
        "ANY_INDEX ANY_KEY MAX_MATCHES Rules format_rule_path parse_ignore parse_path "
        "parse_substitution substitute"
    ),
    "_ruletable": "from_flags from_table rules_from_config",
    "_config": "RuleError find_config project_table",
    "_places": "MAX_PATH here path_value recorded volatile_for",
    "_jsondiff": "Change clip format_path json_diff short window",
    "_requestkey": "RequestKey bare_text request_key",
    "_verdicts": "Verdict attribute",
    "_matcher": "Matcher tolerated_notes",
    "_miss": "Miss",
    "_recording": "EXCHANGE_CACHE InMemory Recorded",
    "_indexed": "IndexedRecordings",
    "_tolerated": ("MAX_TURNS entries_of entry_line report_lines tool_result_changes turn_entries"),
    "_userrules": "add_rule_flags project_rules rules_of_args",
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names.split()}

if TYPE_CHECKING:
    from cassettes.matching._config import RuleError, find_config, project_table
    from cassettes.matching._detectors import slug
    from cassettes.matching._indexed import IndexedRecordings
    from cassettes.matching._jsondiff import Change, clip, format_path, json_diff, short, window
    from cassettes.matching._matcher import Matcher, tolerated_notes
    from cassettes.matching._miss import Miss
    from cassettes.matching._places import (
        MAX_PATH,
        here,
        path_value,
        recorded,
        volatile_for,
    )
    from cassettes.matching._recording import EXCHANGE_CACHE, InMemory, Recorded
    from cassettes.matching._requestkey import RequestKey, bare_text, request_key
    from cassettes.matching._rules import (
        ANY_INDEX,
        ANY_KEY,
        MAX_MATCHES,
        Rules,
        format_rule_path,
        parse_ignore,
        parse_path,
        parse_substitution,
        substitute,
    )
    from cassettes.matching._ruletable import from_flags, from_table, rules_from_config
    from cassettes.matching._tolerated import (
        MAX_TURNS,
        entries_of,
        entry_line,
        report_lines,
        tool_result_changes,
        turn_entries,
    )
    from cassettes.matching._userrules import (
        add_rule_flags,
        project_rules,
        rules_of_args,
    )
    from cassettes.matching._verdicts import Verdict, attribute
    from cassettes.matching._volatile import (
        IGNORED,
        Numbering,
        Span,
        Tolerated,
        VolatileSpans,
        this_process,
        tolerated,
    )


__getattr__ = on_first_use(__name__, _EXPORTS)


__all__ = [
    "ANY_INDEX",
    "ANY_KEY",
    "EXCHANGE_CACHE",
    "IGNORED",
    "MAX_MATCHES",
    "MAX_PATH",
    "MAX_TURNS",
    "Change",
    "InMemory",
    "IndexedRecordings",
    "Matcher",
    "Miss",
    "Numbering",
    "Recorded",
    "RequestKey",
    "RuleError",
    "Rules",
    "Span",
    "Tolerated",
    "Verdict",
    "VolatileSpans",
    "add_rule_flags",
    "attribute",
    "bare_text",
    "clip",
    "entries_of",
    "entry_line",
    "find_config",
    "format_path",
    "format_rule_path",
    "from_flags",
    "from_table",
    "here",
    "json_diff",
    "parse_ignore",
    "parse_path",
    "parse_substitution",
    "path_value",
    "project_rules",
    "project_table",
    "recorded",
    "report_lines",
    "request_key",
    "rules_from_config",
    "rules_of_args",
    "short",
    "slug",
    "substitute",
    "this_process",
    "tolerated",
    "tolerated_notes",
    "tool_result_changes",
    "turn_entries",
    "volatile_for",
    "window",
]
