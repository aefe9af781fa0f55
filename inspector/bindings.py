"""The inspector's own key bindings, as data: the app's (``InspectorApp.BINDINGS``) and the keys
the help screen lists besides those of the panes.

Every binding has a description, a tooltip and an id (``tests/inspector/test_app.py`` checks it);
the help screen (``?``) shows them grouped. Bindings are Textual objects, so this module imports
``textual.binding`` and nothing else of Textual.
"""

from __future__ import annotations

from textual.binding import Binding, BindingType

__all__ = ["APP_BINDINGS", "HELP_OTHER"]

#: The app's bindings: leaving, help, search, findings, conversations, layers, playback, tabs.
APP_BINDINGS: list[BindingType] = [
    Binding("q", "quit", "Quit", tooltip="Leave the inspector", id="app.quit"),
    Binding(
        "question_mark",
        "help",
        "Help",
        key_display="?",
        tooltip="Key bindings and what the panes show",
        id="app.help",
    ),
    Binding(
        "slash",
        "search",
        "Search",
        key_display="/",
        tooltip="Search text, tool calls, results and findings",
        id="search.open",
    ),
    Binding(
        "f",
        "finding(1)",
        "Next finding",
        tooltip="Jump to the next turn below with a finding (round to the top)",
        id="findings.next",
    ),
    Binding(
        "c",
        "next_conversation",
        "Conversation",
        tooltip="Show the next conversation (cycles through all)",
        id="conversations.next",
    ),
    Binding(
        "l",
        "next_layer",
        "Layer",
        tooltip="The next layer pane: E, A, C (in narrow terminals the panes are tabs)",
        id="layers.next",
    ),
    Binding(
        "space",
        "play_pause",
        "Play/pause",
        tooltip="Play the turns one after another at recorded pace",
        id="playback.toggle",
    ),
    Binding(
        "right_square_bracket",
        "step(1)",
        "Step",
        key_display="]",
        tooltip="Step to the next turn",
        id="playback.forward",
    ),
    Binding(
        "left_square_bracket",
        "step(-1)",
        "Back",
        key_display="[",
        tooltip="Step back to the previous turn",
        id="playback.back",
    ),
    Binding(
        "plus,equals_sign",
        "speed(1)",
        "Faster",
        key_display="+",
        show=False,
        tooltip="Play faster",
        id="playback.faster",
    ),
    Binding(
        "minus",
        "speed(-1)",
        "Slower",
        key_display="-",
        show=False,
        tooltip="Play slower",
        id="playback.slower",
    ),
    Binding(
        "r",
        "restream",
        "Re-stream",
        tooltip="Re-stream this turn's text at the pace it was recorded",
        id="playback.restream",
    ),
    Binding(
        "F",
        "finding(-1)",
        "Prev finding",
        show=False,
        tooltip="Jump to the previous turn above with a finding (round to the bottom)",
        id="findings.previous",
    ),
    Binding(
        "n",
        "next_hit(1)",
        "Next match",
        show=False,
        tooltip="After a search (/, a query, enter; the dialog "
        "closed): jump to the next match's turn",
        id="search.next",
    ),
    Binding(
        "N",
        "next_hit(-1)",
        "Prev match",
        show=False,
        tooltip="After a search (/, a query, enter; the dialog "
        "closed): jump to the previous match's turn",
        id="search.previous",
    ),
    Binding(
        "a",
        "all_messages",
        "All messages",
        show=False,
        tooltip="Show every message of the turn's history, not only the latest ones",
        id="messages.all.app",
    ),
    Binding(
        "1",
        "tab('turn')",
        "Turn",
        show=False,
        tooltip="The selected turn: messages and E/A/C panes",
        id="tabs.turn",
    ),
    Binding(
        "2",
        "tab('growth')",
        "Growth",
        show=False,
        tooltip="The token-cost growth chart",
        id="tabs.growth",
    ),
    Binding(
        "3",
        "tab('findings')",
        "Findings",
        show=False,
        tooltip="Every finding of the run",
        id="tabs.findings",
    ),
    Binding(
        "4",
        "tab('fork')",
        "Fork",
        show=False,
        tooltip="A branch (looptap run --from) beside its origin: the fork point, edited items",
        id="tabs.fork",
    ),
]

#: Keys of Textual itself that the help screen lists under "Other".
HELP_OTHER: list[Binding] = [
    Binding("ctrl+p", "command_palette", "Commands", tooltip="The command palette"),
    Binding("tab", "focus_next", "Focus", tooltip="Move focus between the panes"),
]
