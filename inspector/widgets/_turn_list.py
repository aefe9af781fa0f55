"""The turn list: one line per turn, drawn only for the rows on screen (runs can hold 100,000
turns)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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

from ...cassettes.untrusted import clean_line
from ...cassettes.views import TurnSummary
from ..badges import layer_badges
from ..turns import SeqSet

__all__ = ["MANAGED_MARK", "TurnList", "short_finish", "turn_line", "turn_width"]

#: The turn list's mark of a turn whose context was managed.
MANAGED_MARK = "✂"


def _tokens(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1000:.1f}k" if n >= 10_000 else str(n)


def _finish(turn: TurnSummary) -> str:
    if turn.replay_miss:  # looptap's replay answered, not the API: its C finding says what diverged
        return "replay miss"
    if turn.error or (turn.status or 0) >= 400:
        return f"HTTP {turn.status}" if turn.status else "error"
    if turn.tool_calls:
        return f"→{turn.tool_calls} call" + ("s" if turn.tool_calls > 1 else "")
    return clean_line(turn.finish or "?")


def short_finish(finish: str, room: int) -> str:
    """``finish`` in at most ``room`` cells, shortened by whole words, never cut mid-word:
    ``end_turn`` → ``end``, ``→2 calls`` → ``→2``, ``HTTP 500`` → ``500``; nothing if even its
    first word does not fit."""
    if len(finish) <= room:
        return finish
    if finish.startswith("HTTP "):
        word = finish.removeprefix("HTTP ")
    else:
        word = finish.replace("_", " ").replace("-", " ").split(" ")[0]
    return word if 0 < len(word) <= room else ""


def turn_width(turn: TurnSummary, show_conversation: bool) -> int:
    """Cells the row of ``turn`` needs with its finish whole."""
    return len(turn_line(turn, show_conversation).plain)


def turn_line(turn: TurnSummary, show_conversation: bool, width: int | None = None) -> Text:
    """The row of one turn: ``#seq``, conversation/turn, the E A C badges with each layer's number
    of findings beside its letter, the finish, and the tokens in→out. Given a ``width``, the finish
    is shortened by whole words (:func:`short_finish`) so that the token counts are always whole."""
    t = Text(no_wrap=True, overflow="ellipsis", end="")
    t.append(f"#{turn.seq:<4} ", style="dim")
    where = f"{turn.conversation}/{turn.index}" if show_conversation else f"turn {turn.index}"
    t.append(f"{clean_line(where):<7}")
    # Where the context was managed (trimmed, summarised, cleared, edited by the API): a mark in
    # the column's last cell; the C pane (A for the API's edits) says what.
    if turn.managed:
        t.append(MANAGED_MARK, style="bold magenta")
    else:
        t.append(" ")
    t.append_text(layer_badges(turn.findings))
    finish = _finish(turn)
    tokens = f"{_tokens(turn.input)}→{_tokens(turn.output)}"
    room = max(10, len(finish)) if width is None else max(0, width - len(t.plain) - len(tokens) - 2)
    finish = short_finish(finish, room)
    t.append(f" {finish:<{room}} ", style="italic")
    t.append(tokens, style="dim")
    return t


class TurnList(ScrollView, can_focus=True):
    """The turns of the conversation being viewed. The cursor is the selected turn."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "down,j",
            "cursor(1)",
            "Next turn",
            show=False,
            tooltip="Select the next turn",
            id="turns.next",
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
            "pageup",
            "page(-1)",
            "Page up",
            show=False,
            tooltip="Up one screen of turns",
            id="turns.page_up",
        ),
        Binding(
            "home,g",
            "first",
            "First turn",
            show=False,
            tooltip="Select the first turn",
            id="turns.first",
        ),
        Binding(
            "end,G",
            "last",
            "Last turn",
            show=False,
            tooltip="Select the last turn",
            id="turns.last",
        ),
    ]

    #: The selected row, focused and not (their colours are in inspector.tcss).
    COMPONENT_CLASSES: ClassVar[set[str]] = {"turn-list--cursor", "turn-list--cursor-blurred"}

    @dataclass
    class TurnSelected(Message):
        """The cursor moved to a turn."""

        turn_list: TurnList
        seq: int

        @property
        def control(self) -> TurnList:
            return self.turn_list

    cursor: reactive[int] = reactive(0, always_update=True, repaint=True)
    #: Show ``c1/3`` (several conversations listed) instead of ``turn 3``.
    show_conversation: reactive[bool] = reactive(False, repaint=True)
    #: ``G`` pressed: the cursor stays on the last turn as turns are added (a live recording).
    following: reactive[bool] = reactive(False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        #: The listed turns' seqs, in order.
        self.seqs: list[int] = []
        self._summaries: Mapping[int, TurnSummary] = {}
        #: The listed seqs (a seq's row is looked up in :attr:`seqs` when one is selected: a dict
        #: of rows was about 4 MB at a 1 GB run's 58,900 turns).
        self._listed = SeqSet()

    # -- data (attributes down) ---------------------------------------------------------------

    @property
    def turns(self) -> list[TurnSummary]:
        """The listed turns, in order (read from the run's summaries: the list holds seqs)."""
        return [self._summaries[s] for s in self.seqs]

    def set_turns(
        self, seqs: list[int], summaries: Mapping[int, TurnSummary], select: int | None = None
    ) -> None:
        """List these turns (seqs into ``summaries``, the run's own); keep the selected seq if it is
        among them (or select ``select``)."""
        keep = select if select is not None else self.selected_seq
        self.seqs = list(seqs)
        self._summaries = summaries
        self._listed = SeqSet(self.seqs)
        self._resize()
        row = self._row(keep) if keep is not None else None
        self.cursor = row if row is not None else 0
        self.refresh()

    def extend(self, seqs: list[int]) -> None:
        """Append turns (a live recording grew); the selection stays where it is, or, following
        (``G``), moves to the new last turn."""
        first = not self.seqs
        for s in seqs:
            if s in self._listed:
                continue
            self._listed.add(s)
            self.seqs.append(s)
        self._resize()
        if (first and self.seqs) or (self.following and seqs):
            self.cursor = len(self.seqs) - 1 if self.following else 0
        self.refresh()

    @property
    def selected_seq(self) -> int | None:
        if 0 <= self.cursor < len(self.seqs):
            return self.seqs[self.cursor]
        return None

    def _row(self, seq: int) -> int | None:
        """The row of ``seq`` (``None``: not listed)."""
        return self.seqs.index(seq) if seq in self._listed else None

    def select_seq(self, seq: int) -> bool:
        row = self._row(seq)
        if row is None:
            return False
        self.move_to(row)
        return True

    def move_to(self, row: int) -> None:
        """A move the user asked for: it ends following unless it lands on the last row by ``G``."""
        self.following = False
        self.cursor = row

    def step(self, delta: int) -> bool:
        """The turn ``delta`` rows from the cursor (``False``: there is none)."""
        target = self.cursor + delta
        if not 0 <= target < len(self.seqs):
            return False
        self.move_to(target)
        return True

    def _resize(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width or 40, len(self.seqs))

    # -- behaviour ----------------------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.seqs) - 1)) if self.seqs else 0

    def watch_cursor(self, old: int, new: int) -> None:
        if not self.seqs:
            return
        self.scroll_to_region(Region(0, new, 1, 1), animate=False, force=True)
        self.post_message(self.TurnSelected(self, self.seqs[new]))

    def action_cursor(self, delta: int) -> None:
        self.move_to(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self.move_to(self.cursor + direction * max(1, self.scrollable_content_region.height - 1))

    def action_first(self) -> None:
        self.move_to(0)

    def action_last(self) -> None:
        self.move_to(len(self.seqs) - 1)
        self.following = True

    def on_click(self, event: events.Click) -> None:
        row = int(self.scroll_offset.y + event.y)
        if 0 <= row < len(self.seqs):
            self.move_to(row)

    def on_resize(self, event: events.Resize) -> None:
        self._resize()

    # -- drawing ------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        row = y + int(self.scroll_offset.y)
        if row >= len(self.seqs):
            return Strip.blank(width, self.rich_style)
        text = turn_line(self._summaries[self.seqs[row]], self.show_conversation, width)
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
