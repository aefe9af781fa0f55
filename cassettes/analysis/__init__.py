"""Layer analysis: conversations, E/A/C layers per turn, findings by layer, token-cost growth.

One façade over private modules (its names are the whole surface, pinned by
tests/cassettes/analysis/test_analysis_surface.py): the run's analyser (``_analyser``) and what it
produces (``_model``); the checks by layer, E (``_emission``, ``_tool_schema``, ``_plain_schema``,
``_repeats``), A (``_api``, ``_api_errors``, ``_model_mismatch``), C (``dispatch/``), and across
(``_claims``, an agent's ``_rules``), every code they give a row of ``codes`` (which also
demotes a finding resting on a field looptap inferred); conversations threaded (``threading/``)
by ``_message_keys``; tokens and cost (``_tokens``, ``pricing``, ``_price_data``); the state kept
while a run streams (``_state``, ``_records``, ``_parking``, ``_retention``, ``spill``) and a
grown file's continuation (``_continuation``, ``_plain_values``). ``codes`` is public (every
reader of a finding names its constants), and ``spill`` and ``pricing`` stay so: tests set their
``KEEP`` and ``calc_price``, read at call time.
Importing any of it imports the analysis whole, as ``show`` wants it (imported with the collector
paused, then frozen), the continuation too, but not what only an agent's rules use: the rules'
checker (``_rule_check``) loads when a file puts rules in force, and ``looptap rules learn``'s
miner is the public ``learning``, named by its command (docs/startup.md).
"""

from __future__ import annotations

from ._analyser import ACTIVE, RunAnalyser, analyse
from ._claims import STATED_EXIT, claimed_success
from ._continuation import capture, restore
from ._grounding import unsourced
from ._judgement import CHECKS
from ._mcp import McpLinker
from ._message_keys import message_key
from ._model import (
    ApiReport,
    CallCheck,
    Conversation,
    Dispatch,
    Finding,
    Layer,
    McpCall,
    RunAnalysis,
    Severity,
    TokenCount,
    ToolHttp,
    Turn,
    kind_text,
)
from ._model_mismatch import same_model
from ._plain_schema import surely_valid
from ._plain_values import lines, sections
from ._price_data import (
    PRICES_VERSION,
    calc_price,
    get_snapshot,
    provider_for_url,
    table_identity,
)
from ._repeats import canonical_call
from ._rules import (
    FILE,
    KINDS,
    Rule,
    RulesError,
    active,
    active_text,
    load,
    parse_rules,
    using,
)
from ._tokens import apportion, estimate_text
from ._tool_http import tool_http
from ._tool_schema import normalise_schema, schema_errors

__all__ = [
    "ACTIVE",
    "CHECKS",
    "FILE",
    "KINDS",
    "PRICES_VERSION",
    "STATED_EXIT",
    "ApiReport",
    "CallCheck",
    "Conversation",
    "Dispatch",
    "Finding",
    "Layer",
    "McpCall",
    "McpLinker",
    "Rule",
    "RulesError",
    "RunAnalyser",
    "RunAnalysis",
    "Severity",
    "TokenCount",
    "ToolHttp",
    "Turn",
    "active",
    "active_text",
    "analyse",
    "apportion",
    "calc_price",
    "canonical_call",
    "capture",
    "claimed_success",
    "estimate_text",
    "get_snapshot",
    "kind_text",
    "lines",
    "load",
    "message_key",
    "normalise_schema",
    "parse_rules",
    "provider_for_url",
    "restore",
    "same_model",
    "schema_errors",
    "sections",
    "surely_valid",
    "table_identity",
    "tool_http",
    "unsourced",
    "using",
]
