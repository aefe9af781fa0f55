"""The inspector's widgets, one family per private module, grouped by screen area; the names below
are the whole surface (pinned by tests/inspector/test_surface.py):

- the run's frame: the turn list (``_turn_list``), the conversation switcher (``_conversations``),
  the sidebar and tabs (``_sidebar``, ``_tabs``), the status line and error view (``_status``),
  the key bar (``_keys``);
- a turn's panes (``_turn_pane``): the layers E, A and C (``_layers``, ``_emission``, ``_api``,
  ``_dispatch``), the messages (``_messages``), the findings (``_findings``), the fork
  (``_fork``) and the token-cost growth chart (``_growth``). The findings' badges are
  :mod:`inspector.badges`'s, which the layout reads too.
"""

from __future__ import annotations

from inspector.widgets._conversations import ConversationSwitcher, conversation_label
from inspector.widgets._dispatch import PARAMS_LIMIT, params_text
from inspector.widgets._emission import EmissionPane
from inspector.widgets._findings import FindingsTable, FindingsView
from inspector.widgets._fork import ForkPane, ForkRead, read_fork
from inspector.widgets._growth import (
    COST_COLOUR,
    SERIES,
    GrowthChart,
    GrowthView,
    dollars,
    legend_text,
    nice_ticks,
    token_label,
)
from inspector.widgets._keys import KEYS, KeyBar, key_line
from inspector.widgets._layers import LayerPane
from inspector.widgets._messages import MessagesView, client_sent
from inspector.widgets._sidebar import Sidebar
from inspector.widgets._status import ErrorView, RunState, RunStatus
from inspector.widgets._tabs import RunTabs
from inspector.widgets._turn_list import TurnList, short_finish, turn_line
from inspector.widgets._turn_pane import TurnPane

__all__ = [
    "COST_COLOUR",
    "KEYS",
    "PARAMS_LIMIT",
    "SERIES",
    "ConversationSwitcher",
    "EmissionPane",
    "ErrorView",
    "FindingsTable",
    "FindingsView",
    "ForkPane",
    "ForkRead",
    "GrowthChart",
    "GrowthView",
    "KeyBar",
    "LayerPane",
    "MessagesView",
    "RunState",
    "RunStatus",
    "RunTabs",
    "Sidebar",
    "TurnList",
    "TurnPane",
    "client_sent",
    "conversation_label",
    "dollars",
    "key_line",
    "legend_text",
    "nice_ticks",
    "params_text",
    "read_fork",
    "short_finish",
    "token_label",
    "turn_line",
]
