"""Matching: which recorded round trip answers a request, and what of two requests legitimately
differs. One package, in private modules behind this façade (the names below are its whole
surface, pinned by tests/matching/test_surface.py):

- what is volatile between two runs of one agent (dates, clocks, ids, temp paths, the working
  directory, ports), found by shape (``_volatile``, its patterns ``_detectors``), and where a
  run was recorded (the header's paths, :mod:`cassettes.places`; what they make volatile,
  ``_places``);
- the user's rules (``_rules``; the path syntax is :mod:`cassettes.jsonpath`'s), a project's and
  a command line's read together from a table or flags (``_ruletable``); the file they live in,
  and the flags, are
  :mod:`cassettes.project`'s;
- the request key (``_requestkey``), the JSON-path diff (``_jsondiff``), the layer a difference
  implicates (``_verdicts``);
- the recording indexed by request key, in memory or served from the offset index
  (``_recording``, ``_indexed``), the matcher that plays it (``_matcher``), a miss and its closest
  recorded turn (``_miss``), and every tolerated difference on the record (``_tolerated``).

Replay, the pytest plugin, a fork's prefix and ``looptap diff`` tolerate and explain differences the
same way through it. Plain imports: the pytest plugin's start, and ``looptap --help``, need only
:mod:`cassettes.project`, which imports none of this package.
"""

from __future__ import annotations

from ..places import here, recorded, this_process
from ._indexed import IndexedRecordings
from ._jsondiff import Change, clip, json_diff, short, window
from ._matcher import Matcher, tolerated_notes
from ._miss import Miss
from ._places import volatile_for
from ._recording import Recorded
from ._requestkey import RequestKey, bare_text, request_key, tool_host
from ._rules import Rules, parse_ignore, parse_substitution
from ._ruletable import project_rules, rules_of_args
from ._tolerated import (
    MAX_TURNS,
    entries_of,
    entry_line,
    report_lines,
    tool_result_changes,
    turn_entries,
)
from ._verdicts import attribute
from ._volatile import (
    IGNORED,
    Numbering,
    Tolerated,
    VolatileSpans,
    tolerated,
)

__all__ = [
    "IGNORED",
    "MAX_TURNS",
    "Change",
    "IndexedRecordings",
    "Matcher",
    "Miss",
    "Numbering",
    "Recorded",
    "RequestKey",
    "Rules",
    "Tolerated",
    "VolatileSpans",
    "attribute",
    "bare_text",
    "clip",
    "entries_of",
    "entry_line",
    "here",
    "json_diff",
    "parse_ignore",
    "parse_substitution",
    "project_rules",
    "recorded",
    "report_lines",
    "request_key",
    "rules_of_args",
    "short",
    "this_process",
    "tolerated",
    "tolerated_notes",
    "tool_host",
    "tool_result_changes",
    "turn_entries",
    "volatile_for",
    "window",
]
