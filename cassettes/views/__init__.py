"""A run for people and tools. One façade over private modules, its names pinned by
tests/views/test_views_surface.py:

- ``_roundtrip_view``: a round trip's ``show`` lines and the layer analysis' additions to its
  ``show --json`` object; ``_roundtrip_object``: that object, ``looptap.roundtrip/1``;
- ``_layers``: the layer analysis as text; ``_edits``: a fork's edits and an import's provenance
  as shown; ``_progress``: the line shown while a large run is read;
- ``_summary``, ``_search``, ``_timeline``, ``_growth``, ``_money``: turn summaries, search,
  timelines, token growth and costs as shown;
- ``_report`` and ``_htmlpage``: the HTML report's data and its page.

``schema`` stays public: ``python -m cassettes.views.schema`` prints the object's JSON Schema and
the doc's table (docs/show-json.md). Plain imports: ``show`` loads all but the HTML report's
modules anyway; ``replay`` loads none of them.
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
from ._htmlpage import (
    HtmlExtraMissing,
    embed_json,
    render_fleet_html,
    render_html,
)
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
from ._report import report_data
from ._roundtrip_object import roundtrip_json
from ._roundtrip_view import (
    conversation_json,
    edit_lines,
    error_phrase,
    link_text,
    mcp_link_json,
    status_text,
    summary_lines,
    turn_json,
)
from ._search import SearchHit, search_turns, snippet_of
from ._summary import TurnSummary, summarise
from ._timeline import TimelinePoint, text_timeline

__all__ = [
    "BY_HOST",
    "BY_TOKENS",
    "CONTINUED",
    "SEVERITY_MARK",
    "SEVERITY_RANK",
    "SPLIT",
    "GrowthBar",
    "GrowthRows",
    "HtmlExtraMissing",
    "SearchHit",
    "TimelinePoint",
    "TurnSummary",
    "analysis_lines",
    "conversation_json",
    "edit_lines",
    "edit_text",
    "edited_messages",
    "edits_json",
    "embed_json",
    "error_phrase",
    "estimated_note",
    "estimated_why",
    "growth_bars",
    "growth_row",
    "layer_findings",
    "link_text",
    "mcp_link_json",
    "money",
    "reading_line",
    "reconstructed_said",
    "render_fleet_html",
    "render_html",
    "report_data",
    "root_cause_lines",
    "roundtrip_json",
    "search_turns",
    "snippet_of",
    "split_json",
    "status_text",
    "summarise",
    "summary_lines",
    "text_timeline",
    "turn_json",
]
