"""A run for people and tools. One façade over private modules, its names pinned by
tests/views/test_views_surface.py:

- ``_roundtrip_view``: a round trip's ``show`` lines; ``_roundtrip_object``: its ``show --json``
  object, ``looptap.roundtrip/1``, and ``_turn_object``: the layer analysis' additions to it;
- ``_layers``: the layer analysis as text; ``_edits``: a fork's edits and an import's provenance
  as shown; ``_progress``: the line shown while a large run is read;
- ``_summary``, ``_growth``, ``_money``: turn summaries, token growth and costs as shown.

Public beside it, each named by its callers, so that ``show`` does not load them: ``search`` and
``timeline`` (a search of the turns and a stream's timeline: the inspector's, ``looptap mcp``'s),
``report`` and ``htmlpage`` (the HTML report's data and its page, with gzip: ``looptap report``,
the fleet's pages, the pytest plugin's report), and ``schema``: ``python -m
cassettes.views.schema`` prints the object's JSON Schema and the doc's table
(docs/show-json.md). Plain imports: ``show`` loads all of the rest; ``replay`` loads none of it.
"""

from __future__ import annotations

from ._edits import (
    CONTINUED,
    edit_text,
    edited_messages,
    edits_json,
    reconstructed_said,
)
from ._growth import SPLIT, GrowthBar, growth_bars, split_json
from ._layers import (
    SEVERITY_MARK,
    SEVERITY_RANK,
    GrowthRows,
    analysis_lines,
    growth_row,
    layer_findings,
    root_cause_lines,
)
from ._money import (
    BY_HOST,
    BY_TOKENS,
    estimated_note,
    estimated_why,
    money,
)
from ._progress import reading_line
from ._roundtrip_object import roundtrip_json
from ._roundtrip_view import (
    counts_said,
    edit_lines,
    error_phrase,
    http_body_lines,
    http_call_text,
    link_text,
    status_text,
    summary_lines,
)
from ._shell import shell_answered, shell_by_call, shell_call_json, shell_call_lines
from ._summary import TurnSummary, summarise
from ._turn_object import (
    conversation_json,
    mcp_link_json,
    tool_call_http_json,
    tool_http_link_json,
    turn_json,
    turn_layers_json,
)

__all__ = [
    "BY_HOST",
    "BY_TOKENS",
    "CONTINUED",
    "SEVERITY_MARK",
    "SEVERITY_RANK",
    "SPLIT",
    "GrowthBar",
    "GrowthRows",
    "TurnSummary",
    "analysis_lines",
    "conversation_json",
    "counts_said",
    "edit_lines",
    "edit_text",
    "edited_messages",
    "edits_json",
    "error_phrase",
    "estimated_note",
    "estimated_why",
    "growth_bars",
    "growth_row",
    "http_body_lines",
    "http_call_text",
    "layer_findings",
    "link_text",
    "mcp_link_json",
    "money",
    "reading_line",
    "reconstructed_said",
    "root_cause_lines",
    "roundtrip_json",
    "shell_answered",
    "shell_by_call",
    "shell_call_json",
    "shell_call_lines",
    "split_json",
    "status_text",
    "summarise",
    "summary_lines",
    "tool_call_http_json",
    "tool_http_link_json",
    "turn_json",
    "turn_layers_json",
]
