"""The Turn tab: the selected turn's messages as the model saw them, and its E, A and C panes.

:class:`TurnPane` owns what it shows and how: the request in the messages view, the restored turn in
the three layer panes, and which pane is up in the narrow and compact layouts (its :attr:`view`,
the layer tab that is active, each tab's findings label, ``l`` and ``a``). The screen hands it the
turn's data (attributes down: :meth:`show_request`, :meth:`show_panes`) and the layout it is in
(:meth:`fit`); a click on a layer tab is handled here.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Tab, TabPane, Tabs

from ...cassettes.analysis import Finding, Layer, McpCall, Turn
from ...cassettes.models import NormalisedRequest, ToolResult
from ..badges import LAYERS
from ..layout import TAB_LABEL, VIEWS, View, layer_to_bring_up, tab_labels
from ._api import ApiPane
from ._dispatch import DispatchPane
from ._emission import EmissionPane
from ._layers import LayerPane
from ._messages import MessagesView

__all__ = ["TurnPane"]


class TurnPane(TabPane):
    """The Turn tab (``1``): the messages view above the layer panes (or their tabs)."""

    def __init__(self, title: str, *, id: str | None = None) -> None:
        super().__init__(title, id=id)
        #: The pane shown in the narrow and compact layouts (``M``: the messages, compact only).
        self.view: View = "E"
        #: The layout (:meth:`fit`): one pane at a time (narrow or compact), the messages a tab.
        self.narrow = self.compact = False

    def compose(self) -> ComposeResult:
        yield MessagesView(id="messages")
        # Active from the start on the view shown: a first activation of another tab would arrive
        # here as a message and bring that one up.
        yield Tabs(
            *(Tab(TAB_LABEL[x][0], id=f"layer-{x}") for x in VIEWS),
            active=f"layer-{self.view}",
            id="layer-tabs",
        )
        with Horizontal(id="layers"):
            yield EmissionPane(id="pane-e")
            yield ApiPane(id="pane-a")
            yield DispatchPane(id="pane-c")

    def on_mount(self) -> None:
        # Clicks and ``l`` switch the layer tabs; focus stays where the user is (the turn list).
        self.layer_tabs.can_focus = False

    # -- the widgets -------------------------------------------------------------------------------

    @cached_property
    def messages(self) -> MessagesView:
        return self.query_one(MessagesView)

    @cached_property
    def pane_e(self) -> EmissionPane:
        return self.query_one(EmissionPane)

    @cached_property
    def layer_panes(self) -> dict[Layer, LayerPane]:
        return {pane.LAYER: pane for pane in self.query(LayerPane)}

    @cached_property
    def layer_tabs(self) -> Tabs:
        return self.query_one("#layer-tabs", Tabs)

    # -- what the turn holds (attributes down) -----------------------------------------------------

    def show_note(self, note: str) -> None:
        self.messages.show_note(note)

    def show_request(
        self,
        request: NormalisedRequest | None,
        seq: int,
        appended_from: int | None,
        edits: list[dict[str, Any]] | None,
        reconstructed: dict[str, Any] | None = None,
    ) -> None:
        """The turn's request in the messages view (``None``: it could not be parsed)."""
        if request is None:
            self.messages.show_note(f"turn #{seq}: the request could not be parsed")
        else:
            self.messages.show_request(
                request, appended_from, edits=edits, reconstructed=reconstructed
            )

    def show_panes(
        self,
        turn: Turn,
        results: dict[str, ToolResult] | None,
        runs: dict[str, list[McpCall]],
        answered: dict[str, list[McpCall]] | None = None,
        shell: dict[str, dict[str, Any]] | None = None,
        shell_answered: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """The restored turn in the E, A and C panes, with what its next turn sent back (E) and
        the tool's side of the calls whose results it sent (C); ``shell``, ``shell_answered``: the
        traced shell commands of its calls and of the calls it answered (TurnShown's)."""
        self.pane_e.show_turn(turn, results, runs, shell)
        self.query_one(ApiPane).show_turn(turn)
        self.query_one(DispatchPane).show_turn(turn, answered, shell_answered)

    # -- the layer panes: side by side, or (narrow, compact) one at a time under tabs --------------

    def show_view(self, view: View) -> None:
        """Make ``view``'s pane the one shown in the narrow and compact layouts (its tab active)."""
        self.view = view
        if not self.is_attached:
            return
        for layer, pane in self.layer_panes.items():
            pane.set_class(layer == view, "-shown")
        self.set_class(view == "M", "-messages-shown")
        if self.layer_tabs.active != f"layer-{view}":
            self.layer_tabs.active = f"layer-{view}"

    def fit(self, *, narrow: bool, compact: bool) -> None:
        """The layout: in the narrow and compact ones one pane at a time; the messages are a tab
        of their own only in the compact one."""
        self.narrow, self.compact = narrow or compact, compact
        if compact:
            self.layer_tabs.show("layer-M")
        else:
            self.layer_tabs.hide("layer-M")
            if self.view == "M":
                self.show_view("E")

    def pane_visible(self, view: View) -> bool:
        """Whether ``view``'s pane is on screen in this layout."""
        if view == "M":
            return not self.compact or self.view == "M"
        return not self.narrow or self.view == view

    def next_layer(self) -> None:
        """``l``: the next layer's pane; wide, where the three are all shown, focus moves into it
        (to scroll it; j/k still move the turns, esc goes back)."""
        order: tuple[View, ...] = VIEWS if self.compact else LAYERS
        i = (order.index(self.view) + 1) % len(order) if self.view in order else 0
        self.show_view(order[i])
        if not self.narrow:
            self.layer_panes[LAYERS[i]].focus()

    def toggle_all_messages(self) -> None:
        """``a``: every message, parts whole (or folded again); in the compact layout the messages
        tab comes up, so the change is seen."""
        if not self.pane_visible("M"):
            self.show_view("M")
        self.messages.action_toggle_all()

    @on(Tabs.TabActivated, "#layer-tabs")
    def _layer_tab(self, event: Tabs.TabActivated) -> None:
        event.stop()  # not the main tabs
        # Activations arrive as messages: one this pane itself caused before a later change of
        # ``active`` is stale, and would undo that change.
        if event.tab.id != self.layer_tabs.active or not self.is_attached:
            return
        view = next((v for v in VIEWS if f"layer-{v}" == event.tab.id), None)
        if view is not None and view != self.view:
            self.show_view(view)

    # -- the layer tabs' labels, and the layer a turn's findings bring up ------------------------

    def label_tabs(self, findings: Sequence[Finding], *, width: int, api: str = "ok") -> None:
        """Each layer tab says its layer's findings (``E ✖1``; A without one: ``api``); the long
        labels if they all fit the tab strip, else the short ones, so every layer's count is always
        on screen."""
        room = (self.layer_tabs.size.width or width) - 2
        labels = tab_labels(findings, compact=self.compact, room=room, api=api)
        for v, label in labels.items():
            self.layer_tabs.query_one(f"#layer-{v}", Tab).label = label

    def bring_up(self, findings: Sequence[Finding], *, jump: bool = False) -> None:
        """One pane at a time: a turn whose findings are in another layer than the one shown brings
        that layer up (the worst first) — a warning or an error always, any finding when the shown
        layer has none. ``jump`` (``f``, a finding chosen): even from the messages tab."""
        if not self.narrow or (self.view == "M" and not jump):
            return
        layer = layer_to_bring_up(findings, self.view)
        if layer is not None:
            self.show_view(layer)
