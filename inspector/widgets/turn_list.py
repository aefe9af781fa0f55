"""The turn list: one line per turn, drawn only for the rows on screen (runs can hold 100,000 turns)."""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from cassettes.untrusted import clean_line
from cassettes.views.summary import TurnSummary
from inspector.widgets.badges import layer_badges

__all__ = ["TurnList", "turn_line"]


def _tokens(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1000:.1f}k" if n >= 10_000 else str(n)


def turn_line(turn: TurnSummary, show_conversation: bool, width: int | None = None) -> Text:
    """The row of one turn: ``#seq``, conversation/turn, the E A C badges with each layer's number of
    findings beside its letter, the finish, and the tokens in→out. Given a ``width``, the finish is
    shortened so that the token counts are always whole."""
    t = Text(no_wrap=True, overflow="ellipsis", end="")
    t.append(f"#{turn.seq:<4} ", style="dim")
    where = f"{turn.conversation}/{turn.index}" if show_conversation else f"turn {turn.index}"
    t.append(f"{clean_line(where):<7} ")
    t.append_text(layer_badges(turn.findings))
    if turn.error or (turn.status or 0) >= 400:
        finish = f"HTTP {turn.status}" if turn.status else "error"
    elif turn.tool_calls:
        finish = f"→{turn.tool_calls} call" + ("s" if turn.tool_calls > 1 else "")
    else:
        finish = turn.finish or "?"
    tokens = f"{_tokens(turn.input)}→{_tokens(turn.output)}"
    room = 10 if width is None else max(0, width - len(t.plain) - len(tokens) - 2)
    finish = clean_line(finish)
    if len(finish) > room:
        finish = finish[: max(0, room - 1)] + "…" if room else ""
    t.append(f" {finish:<{room}} ", style="italic")
    t.append(tokens, style="dim")
    return t


class TurnList(ScrollView, can_focus=True):
    """The turns of the conversation being viewed. The cursor is the selected turn."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "down,j", "cursor(1)", "Next turn", show=False, tooltip="Select the next turn", id="turns.next"
        ),
        Binding(
            "up,k",
            "cursor(-1)",
            "Previous turn",
            show=False,
            tooltip="Select the previous turn",
            id="turns.previous",
        ),
        Binding(
            "pagedown",
            "page(1)",
            "Page down",
            show=False,
            tooltip="Down one screen of turns",
            id="turns.page_down",
        ),
        Binding(
            "pageup", "page(-1)", "Page up", show=False, tooltip="Up one screen of turns", id="turns.page_up"
        ),
        Binding(
            "home,g", "first", "First turn", show=False, tooltip="Select the first turn", id="turns.first"
        ),
        Binding("end,G", "last", "Last turn", show=False, tooltip="Select the last turn", id="turns.last"),
    ]

    #: The selected row, focused and not (their colours are in inspector.tcss).
    COMPONENT_CLASSES: ClassVar[set[str]] = {"turn-list--cursor", "turn-list--cursor-blurred"}

    class TurnSelected(Message):
        """The cursor moved to a turn."""

        def __init__(self, turn_list: TurnList, seq: int) -> None:
            super().__init__()
            self.turn_list = turn_list
            self.seq = seq

        @property
        def control(self) -> TurnList:
            return self.turn_list

    cursor: reactive[int] = reactive(0, always_update=True, repaint=True)
    #: Show ``c1/3`` (several conversations listed) instead of ``turn 3``.
    show_conversation: reactive[bool] = reactive(False, repaint=True)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._turns: list[TurnSummary] = []
        self._row_of: dict[int, int] = {}

    # -- data (attributes down) ---------------------------------------------------------------

    @property
    def turns(self) -> list[TurnSummary]:
        return self._turns

    def set_turns(self, turns: list[TurnSummary], select: int | None = None) -> None:
        """Show these turns; keep the selected seq if it is among them (or select ``select``)."""
        keep = select if select is not None else self.selected_seq
        self._turns = list(turns)
        self._row_of = {t.seq: i for i, t in enumerate(self._turns)}
        self._resize()
        row = self._row_of.get(keep, 0) if keep is not None else 0
        self.cursor = row
        self.refresh()

    def extend(self, turns: list[TurnSummary]) -> None:
        """Append turns (a live recording grew); the selection stays where it is."""
        first = not self._turns
        for t in turns:
            self._row_of[t.seq] = len(self._turns)
            self._turns.append(t)
        self._resize()
        if first and self._turns:
            self.cursor = 0
        self.refresh()

    @property
    def selected_seq(self) -> int | None:
        if 0 <= self.cursor < len(self._turns):
            return self._turns[self.cursor].seq
        return None

    def select_seq(self, seq: int) -> bool:
        row = self._row_of.get(seq)
        if row is None:
            return False
        self.cursor = row
        return True

    def _resize(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width or 40, len(self._turns))

    # -- behaviour ----------------------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self._turns) - 1)) if self._turns else 0

    def watch_cursor(self, old: int, new: int) -> None:
        if not self._turns:
            return
        self.scroll_to_region(Region(0, new, 1, 1), animate=False, force=True)
        self.post_message(self.TurnSelected(self, self._turns[new].seq))

    def action_cursor(self, delta: int) -> None:
        self.cursor += delta

    def action_page(self, direction: int) -> None:
        self.cursor += direction * max(1, self.scrollable_content_region.height - 1)

    def action_first(self) -> None:
        self.cursor = 0

    def action_last(self) -> None:
        self.cursor = len(self._turns) - 1

    def on_click(self, event: events.Click) -> None:
        row = int(self.scroll_offset.y + event.y)
        if 0 <= row < len(self._turns):
            self.cursor = row

    def on_resize(self, event: events.Resize) -> None:
        self._resize()

    # -- drawing ------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        row = y + int(self.scroll_offset.y)
        if row >= len(self._turns):
            return Strip.blank(width, self.rich_style)
        text = turn_line(self._turns[row], self.show_conversation, width)
        text.truncate(width, overflow="ellipsis", pad=True)
        base = self.rich_style
        if row == self.cursor:
            cls = "turn-list--cursor" if self.has_focus else "turn-list--cursor-blurred"
            base = base + self.get_component_rich_style(cls)
        segments = [
            Segment(s.text, base + s.style if isinstance(s.style, Style) else base)
            for s in text.render(self.app.console)
        ]
        return Strip(segments, width).crop(0, width)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
