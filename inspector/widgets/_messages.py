"""The messages array of the selected turn, as the model saw it, with what this turn added
marked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from ...cassettes.hints import count
from ...cassettes.models import Message, NormalisedRequest, Part, ToolResult
from ...cassettes.untrusted import clean, clean_line
from ...cassettes.views import CONTINUED, edit_text, edited_messages, reconstructed_said
from ..safe import wire, wire_line
from ._layers import pane_bindings

__all__ = ["MessagesView", "call_names", "part_text"]

#: Longest part shown in full; longer ones are cut with a note of how much was left out.
PART_LIMIT = 2000
#: And at most this many lines of it.
LINE_LIMIT = 24
#: Messages shown before the older ones are folded (``a`` shows them all).
FOLD_AFTER = 20
#: With ``a``: the longest part shown (no line limit).
FULL_PART_LIMIT = 20_000
#: Most messages ever drawn for one turn, ``a`` or not (a hostile or huge request can hold 100,000:
#: drawing them all froze the inspector); the rest are counted, ``looptap show --json`` has them.
SHOW_AT_MOST = 500


def _cut_part(text: str, limit: int = PART_LIMIT, lines: int | None = LINE_LIMIT) -> str:
    """A long part shortened (characters and lines), saying how much was left out; cleaned
    (wire text: controls and bidi shown visibly, see inspector/safe.py)."""
    text = clean(text)
    cut = text if len(text) <= limit else text[:limit]
    rows = cut.split("\n")
    if lines is not None and len(rows) > lines:
        cut = "\n".join(rows[:lines])
    left = len(text) - len(cut)
    return text if left <= 0 else cut + f" … ({count(left, 'more character')})"


def part_text(p: Part, names: dict[str, str] | None = None, full: bool = False) -> Text:
    """One part of a message, as text; ``names`` maps call ids to tool names (a result that does
    not carry its tool's name, as in OpenAI's wire format, is named after the call it answers);
    ``full``: long parts up to :data:`FULL_PART_LIMIT` characters, every line."""

    def _cut(text: str) -> str:
        return _cut_part(text, FULL_PART_LIMIT, None) if full else _cut_part(text)

    if p.tool_call is not None:
        c = p.tool_call
        return Text.assemble(
            ("⚙ call ", "bold magenta"),
            (clean_line(f"{c.name}"), "bold"),
            f"({_cut(c.arguments_raw or '')})",
            (clean_line(f"  id={c.id}"), "dim"),
        )
    if p.tool_result is not None:
        return _result_text(p.tool_result, names, _cut)
    if p.kind == "reasoning":
        return Text(_cut(p.text or ""), style="italic dim")
    if p.kind == "refusal":
        return Text.assemble(("refusal: ", "bold red"), _cut(p.text or ""))
    if p.kind == "media":
        return wire_line(f"[{p.media_type or 'media'}]", style="dim")
    if p.kind == "other":
        return wire(f"[{p.kind}: {p.text or 'provider-specific block'}]", style="dim")
    return Text(_cut(p.text or ""))


def _result_text(r: ToolResult, names: dict[str, str] | None, cut: Callable[[str], str]) -> Text:
    """A tool result: which call it answers (named after the call when it carries no name), then
    its content, ``cut`` to size."""
    name = r.name or (names or {}).get(r.call_id or "")
    head = Text.assemble(
        ("↩ result ", "bold cyan"),
        (clean_line(f"for {name} ") if name else "", "bold"),
        (clean_line(f"id={r.call_id}"), "dim"),
    )
    if r.is_error:
        head.append("  error", style="bold red")
    return Text.assemble(head, "\n", cut(r.content))


def client_sent(marks: list[dict[str, Any]], full: bool = False) -> Text:
    """Below an edited message: what the client had sent there (the model saw the edit)."""
    t = Text()
    for m in marks:
        who = CONTINUED if m.get("edit") == "continue" else "the client sent"
        t.append(f"\n  ✎ {clean_line(str(m.get('edit')))}: {who} ", style="yellow")
        if m.get("before_omitted"):
            t.append("(too large to keep)", style="dim")
        else:
            t.append("\n")
            t.append(
                _cut_part(
                    edit_text(m.get("before")),
                    FULL_PART_LIMIT if full else PART_LIMIT,
                    None if full else LINE_LIMIT,
                ),
                style="dim",
            )
    return t


def _left_out(start: int, capped: bool) -> list[RenderableType]:
    """The line saying how many earlier messages are not drawn (past the limit, or folded)."""
    if capped:
        note = (
            f"… {count(start, 'earlier message')} not drawn (at most the last "
            f"{SHOW_AT_MOST:,} of a turn are; looptap show --json has them all)"
        )
    elif start:
        note = f"… {count(start, 'earlier message')} folded (press a to show all)"
    else:
        return []
    return [Text(""), Text(note, style="dim italic")]


def call_names(msgs: list[Message]) -> dict[str, str]:
    """Each tool call's name by its id (a result in OpenAI's format names only the call)."""
    return {
        p.tool_call.id: p.tool_call.name
        for m in msgs
        for p in m.parts
        if p.tool_call is not None and p.tool_call.id and p.tool_call.name
    }


class MessagesView(VerticalScroll, can_focus=True):
    """The request's history. Messages from ``appended_from`` on are what this turn added (C)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "a",
            "toggle_all",
            "All messages",
            tooltip="Show every message, not only the latest ones",
            id="messages.all",
        ),
        *pane_bindings("messages"),
    ]

    show_all: reactive[bool] = reactive(False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._request: NormalisedRequest | None = None
        self._appended_from: int | None = None
        self._note = "select a turn"
        self._edits: list[dict[str, Any]] = []
        #: An imported round trip's provenance, said (cassettes.views.reconstructed_said).
        self._reconstructed: str | None = None
        #: Message index (-1: the system prompt apart) → the edit marks that rewrote it.
        self._edited: dict[int, list[dict[str, Any]]] = {}
        #: What is drawn above the first new message (to scroll past it).
        self._before_new: list[RenderableType] = []
        #: The view holds the turn's first new message at its top (re-measured whenever its size,
        #: content or width changes: the layer panes below fill in from another worker, a
        #: scrollbar appears, the terminal is resized) until the user scrolls it.
        self._hold_new = False

    def compose(self) -> ComposeResult:
        yield Static(id="messages-body")

    def show_request(
        self,
        request: NormalisedRequest | None,
        appended_from: int | None,
        note: str = "",
        edits: list[dict[str, Any]] | None = None,
        reconstructed: dict[str, Any] | None = None,
    ) -> None:
        """Show a turn's request (attributes down); ``appended_from`` marks the new messages;
        ``edits``, a fork's what-if edits of it (the messages they rewrote marked, with what the
        client had sent); ``reconstructed``, an imported round trip's provenance mark."""
        self._request = request
        self._appended_from = appended_from
        self._note = note
        self._edits = edits or []
        self._reconstructed = reconstructed_said(reconstructed)
        self._edited = (
            edited_messages(request, self._edits) if request is not None and edits else {}
        )
        self._draw()
        # Open on what this turn appended (its first message at the top), measured once laid out
        # and again at every change of layout until the user scrolls (``on_resize``).
        self._hold_new = True
        self.call_after_refresh(self._scroll_to_new)

    def show_note(self, note: str) -> None:
        self._request = None
        self._note = note
        self._hold_new = False
        self._draw()

    def watch_show_all(self, show_all: bool) -> None:
        self._draw()
        # Every message: from the first (the header says the mode); folded again: back on what
        # this turn appended.
        self._hold_new = not show_all
        if show_all:
            self._scroll_y(0)
        else:
            self.call_after_refresh(self._scroll_to_new)

    def action_toggle_all(self) -> None:
        self.show_all = not self.show_all

    @property
    def new_offset(self) -> int:
        """The line of the first new message at the body's present width (0: none before it)."""
        if not self._before_new:
            return 0
        body = self.query_one("#messages-body", Static)
        console = self.app.console
        width = max(1, body.content_region.width)
        return len(
            console.render_lines(
                Group(*self._before_new), console.options.update_width(width), pad=False
            )
        )

    @property
    def holding_new(self) -> bool:
        """Whether the view holds the turn's first new message at its top (as far as it scrolls)."""
        return self._hold_new

    def _scroll_to_new(self) -> None:
        if self._hold_new:
            self._scroll_y(self.new_offset)

    def _scroll_y(self, y: int) -> None:
        """Scroll now, as far as the view scrolls (``scroll_to`` would wait for another refresh
        and count as the user's scroll: ``release_anchor``)."""
        self.scroll_target_y = self.scroll_y = y

    # A new size, or a new virtual size (a scrollbar came or went, so the body's width and its
    # wrapping changed): the first new message is elsewhere, or the view can now scroll as far as
    # it (the panes below took their height). Measured once that layout is on screen.
    def on_resize(self, event: events.Resize) -> None:
        self._scroll_to_new()

    def watch_virtual_size(self) -> None:
        if self._hold_new:
            self.call_after_refresh(self._scroll_to_new)

    # The user scrolled (keys, scrollbar, wheel): the view stays where they put it.
    def release_anchor(self) -> None:
        self._hold_new = False
        super().release_anchor()

    def action_scroll_end(self) -> None:
        self._hold_new = False
        super().action_scroll_end()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._hold_new = False

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._hold_new = False

    def _draw(self) -> None:
        body = self.query_one("#messages-body", Static)
        req = self._request
        self._before_new = []
        if req is None:
            body.update(wire(self._note, style="dim italic"))
            return
        msgs = req.messages
        new_from = self._appended_from if self._appended_from is not None else len(msgs)
        out: list[RenderableType] = [self._head(req, new_from)]
        if req.system and not any(m.role in ("system", "developer") for m in msgs):
            # Pinned only when it travels apart from the history (a history's own system message
            # is shown in place, once).
            out += [Text(""), self._system(req)]
        start, capped = self._first_drawn(len(msgs), new_from)
        out += _left_out(start, capped)
        names = call_names(msgs)
        for i in range(start, len(msgs)):
            if i == new_from and i > start:
                self._before_new = list(out)
            out.append(Text(""))
            msg = self._message(i, msgs[i], i >= new_from, names, self.show_all, i in self._edited)
            if i in self._edited:
                msg.append_text(client_sent(self._edited[i], self.show_all))
            out.append(msg)
        body.update(Group(*out))

    def _head(self, req: NormalisedRequest, new_from: int) -> Text:
        """The first line: how many messages and tools, the model, what is new, the mode, the
        note."""
        msgs = req.messages
        head = Text.assemble(
            (f"{len(msgs)} message{'' if len(msgs) == 1 else 's'}", "bold"),
            f" · {len(req.tools)} tool{'' if len(req.tools) == 1 else 's'} offered",
            f" · model {clean_line(req.model or '?')}",
        )
        if new_from == len(msgs) - 1:
            head.append(f" · new this turn: [{new_from}]", style="bold green")
        elif new_from < len(msgs):
            head.append(f" · new this turn: [{new_from}]…[{len(msgs) - 1}]", style="bold green")
        else:
            head.append(" · nothing new appended", style="dim")
        head.append(
            " · all, parts whole (a: fold)" if self.show_all else " · a: all, parts whole",
            style="cyan" if self.show_all else "dim",
        )
        if self._note:
            head.append(f"  {clean_line(self._note)}", style="yellow")
        if self._edits:
            labels = ", ".join(dict.fromkeys(str(m.get("edit")) for m in self._edits))
            head.append(f" · ✎ EDITED by the fork: {clean_line(labels)}", style="bold yellow")
        if self._reconstructed is not None:  # the file's words: cleaned, never markup
            head.append("\n")
            head.append_text(wire_line(f"⚙ {self._reconstructed}", style="magenta"))
        return head

    def _system(self, req: NormalisedRequest) -> Text:
        """The system prompt sent apart from the history (and what the client had sent, if
        edited)."""
        sys_text = Text.assemble(("system", "bold yellow"), "\n")
        sys_text.append_text(Text("\n").join(part_text(p) for p in req.system))
        if -1 in self._edited:
            sys_text.append_text(client_sent(self._edited[-1]))
        return sys_text

    def _first_drawn(self, count: int, new_from: int) -> tuple[int, bool]:
        """The first message drawn, and whether :data:`SHOW_AT_MOST` set it: older ones are folded
        beyond :data:`FOLD_AFTER` (unless ``a``), and never more than the limit are drawn."""
        start = 0
        if not self.show_all and count > FOLD_AFTER:
            start = min(new_from, count - FOLD_AFTER)
        if count - start > SHOW_AT_MOST:
            return count - SHOW_AT_MOST, True
        return start, False

    @staticmethod
    def _message(
        i: int,
        m: Message,
        new: bool,
        names: dict[str, str] | None = None,
        full: bool = False,
        edited: bool = False,
    ) -> Text:
        role_style = {"user": "bold blue", "assistant": "bold magenta", "tool": "bold cyan"}.get(
            m.role, "bold yellow"
        )
        t = Text()
        t.append("▌ NEW " if new else "  ", style="bold green" if new else "")
        t.append(f"[{i}] ", style="dim")
        t.append(clean_line(m.role), style=role_style)
        if edited:
            t.append("  ✎ EDITED by the fork", style="bold yellow")
        for p in m.parts:
            t.append("\n")
            piece = part_text(p, names, full)
            if new:
                piece.stylize("on #0f2f1a")
            t.append_text(piece)
        return t
