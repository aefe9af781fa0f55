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

from ._conversations import ConversationSwitcher, conversation_label
from ._dispatch import PARAMS_LIMIT, params_text
from ._emission import EmissionPane
from ._findings import FindingsTable, FindingsView
from ._fork import ForkPane, ForkRead, read_fork
from ._growth import (
    COST_COLOUR,
    SERIES,
    GrowthChart,
    GrowthView,
    dollars,
    legend_text,
    nice_ticks,
    token_label,
)
from ._keys import KEYS, KeyBar, key_line
from ._layers import LayerPane
from ._messages import MessagesView, client_sent
from ._sidebar import Sidebar
from ._status import ErrorView, RunState, RunStatus
from ._tabs import RunTabs
from ._turn_list import TurnList, short_finish, turn_line
from ._turn_pane import TurnPane

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
