"""The inspector's layouts applied: :mod:`inspector.layout` decides, :class:`AppPanes` applies.

Wide, narrow and compact (the screen's classes, by terminal size); the turn list's width; in the
narrow and compact layouts the one layer pane shown (a :data:`inspector.layout.View`, its tab
active, a tab clicked); each tab's findings label; the layer a turn's findings bring up; where focus
is, said in the playback line.
"""

from __future__ import annotations

from textual import events, on
from textual.widget import Widget
from textual.widgets import Tab, Tabs

from cassettes.views.summary import TurnSummary
from inspector.app_base import AppBase
from inspector.layout import (
    FOCUS_NAMES,
    View,
    layer_to_bring_up,
    layout_classes,
    sidebar_width,
    tab_labels,
    tab_view,
    width_sample,
)
from inspector.widgets.turn_list import turn_width

__all__ = ["AppPanes"]


class AppPanes(AppBase):
    """The layout of the inspector's screen, applied to its widgets."""

    # -- the three layouts, by terminal size ------------------------------------------------------

    def on_resize(self, event: events.Resize) -> None:
        classes = layout_classes(*event.size)
        for name, on_ in classes.items():
            self.screen_stack[0].set_class(on_, name)
        if classes["-compact"]:
            self.layer_tabs.show("layer-M")
        else:
            self.layer_tabs.hide("layer-M")
            if self.view == "M":
                self.show_view("E")
        self._fit_sidebar()
        self._label_tabs()

    def _layout(self, name: str) -> bool:
        # (messages still queued when the app closes find no screen)
        return bool(self._screen_stack) and self.screen_stack[0].has_class(name)

    @property
    def narrow(self) -> bool:
        """One pane at a time (the narrow or the compact layout)."""
        return self._layout("-narrow") or self._layout("-compact")

    @property
    def compact(self) -> bool:
        return self._layout("-compact")

    def _fit_sidebar(self) -> None:
        """The turn list as wide as its rows need (finish whole), within a share of the terminal;
        what is left of a long finish is shortened by whole words (``turn_line``)."""
        if self.compact:
            self.sidebar.styles.width = None
            return
        summaries = self.source.summaries
        sample = width_sample(self.turn_list.seqs)
        need = max((turn_width(summaries[s], self.turn_list.show_conversation) for s in sample), default=40)
        self.sidebar.styles.width = sidebar_width(self.size.width, need)

    # -- the layer panes: side by side, or (narrow, compact) one at a time under tabs --------------

    def show_view(self, view: View) -> None:
        """Make ``view``'s pane the one shown in the narrow and compact layouts (its tab active)."""
        self.view = view
        if not self._screen_stack:
            return
        for layer, pane in self.layer_panes.items():
            pane.set_class(layer == view, "-shown")
        self.screen_stack[0].set_class(view == "M", "-messages-shown")
        if self.layer_tabs.active != f"layer-{view}":
            self.layer_tabs.active = f"layer-{view}"

    def pane_visible(self, view: View) -> bool:
        if view == "M":
            return not self.compact or self.view == "M"
        return not self.narrow or self.view == view

    @on(Tabs.TabActivated, "#layer-tabs")
    def _layer_tab(self, event: Tabs.TabActivated) -> None:
        event.stop()  # not the main tabs
        # Activations arrive as messages: one the app itself caused before a later change of
        # ``active`` is stale, and would undo that change.
        if event.tab.id != self.layer_tabs.active or not self._screen_stack:
            return
        view = tab_view(event.tab.id)
        if view is not None and view != self.view:
            self.show_view(view)

    # -- focus: said in the playback line when it is not on the turn list ----------------------

    def action_focus_turns(self) -> None:
        self.turn_list.focus()

    def _focus_moved(self, widget: Widget | None) -> None:
        """Say where focus is when it is not on the turn list (keys then act on that pane)."""
        if widget is None or widget is self.turn_list or self.screen is not self.screen_stack[0]:
            if self.notice.startswith("focus:"):
                self.notice = ""
            return
        name = FOCUS_NAMES.get(widget.id or "")
        if name is not None:
            self.notice = f"focus: {name} · ↑↓ scroll · j/k turns · esc list"
        elif self.notice.startswith("focus:"):
            self.notice = ""

    # -- the layer tabs' labels, and the layer a turn's findings bring up ------------------------

    def _label_tabs(self, turn: TurnSummary | None = None) -> None:
        """Each layer tab says its layer's findings (``E ✖1``); the long labels if they all fit the
        tab strip, else the short ones, so every layer's count is always on screen."""
        turn = turn if turn is not None else self.summary(self.selected)
        room = (self.layer_tabs.size.width or self.size.width) - 2
        labels = tab_labels(turn.findings if turn is not None else [], compact=self.compact, room=room)
        for v, label in labels.items():
            self.layer_tabs.query_one(f"#layer-{v}", Tab).label = label

    def _bring_up_findings(self, turn: TurnSummary, *, jump: bool = False) -> None:
        """One pane at a time: a turn whose findings are in another layer than the one shown brings
        that layer up (the worst first) — a warning or an error always, any finding when the shown
        layer has none. ``jump`` (``f``, a finding chosen): even from the messages tab."""
        if not self.narrow or (self.view == "M" and not jump):
            return
        layer = layer_to_bring_up(turn.findings, self.view)
        if layer is not None:
            self.show_view(layer)
