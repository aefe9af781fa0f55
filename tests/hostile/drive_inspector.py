"""Drive the inspector headless over one file, as a user would, and check what it showed.

    python tests/hostile/drive_inspector.py FILE

Reads the whole file, selects every turn (up to 60), visits every tab, opens the findings, a
search for a hostile string, the help screen and the command palette, replays a turn, jumps
between findings, and clicks every widget shown (each once, at a cell it owns; a widget still
not clicked after the rounds is a problem). Then walks every widget of every screen it visited
and checks that:

- no rendered line holds a control or invisible format character (ESC, C1, BEL, bidi, zero-width);
- no markup from the file was interpreted: the app is still running (``[@click=app.quit]`` did not
  quit it), no screenshot file appeared (``[@click=app.screenshot(...)]``), and the literal
  ``[@click=`` text is on screen wherever the hostile strings are shown.

Prints one line per problem and a summary; exits 1 on a problem, 0 otherwise. What the user was
told (toasts, the failure view) is printed too, cleaned.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from textual.errors import NoWidget
from textual.screen import Screen
from textual.widget import Widget

from looptap.cassettes.untrusted import clean_line, has_unsafe
from looptap.inspector.app import InspectorApp
from tests.hostile.corpus import PWNED_DIR


def rendered_lines(widget: Widget) -> list[str]:
    try:
        lines = widget.render_lines(widget.region.reset_offset) if widget.region.area else []
    except Exception as exc:  # a widget that cannot render is itself a finding
        return [f"<render error {type(exc).__name__}: {exc}>"]
    return ["".join(seg.text for seg in strip) for strip in lines]


#: Rounds of clicks: each clicks the widgets a round before it showed and did not click.
CLICK_ROUNDS = 4


def owned_cells(app: InspectorApp) -> dict[str, tuple[int, int]]:
    """{widget: the first cell of the screen that is that widget's} of every widget shown, by its
    path from the screen (its class, id and place among its siblings: stable across a re-mount)."""
    cells: dict[str, tuple[int, int]] = {}
    width, height = app.size
    for y in range(height):
        for x in range(width):
            try:
                widget, _ = app.screen.get_widget_at(x, y)
            except NoWidget:
                continue
            cells.setdefault(widget_path(widget), (x, y))
    return cells


def widget_path(widget: Widget) -> str:
    parts = []
    node: Widget | None = widget
    while isinstance(node, Widget) and not isinstance(node, Screen):
        siblings = list(node.parent.children) if isinstance(node.parent, Widget) else []
        place = siblings.index(node) if node in siblings else node.name  # (a scrollbar: its name)
        parts.append(f"{type(node).__name__}#{node.id or place}")
        node = node.parent if isinstance(node.parent, Widget) else None
    return "/".join(reversed(parts))


async def drive(path: Path, shots: Path) -> tuple[list[str], list[str], bool, int]:
    app = InspectorApp(path)
    problems: list[str] = []
    seen_text: list[str] = []

    def walk(label: str) -> None:
        for widget in app.screen.walk_children(with_self=True):
            for line in rendered_lines(widget):
                seen_text.append(line)
                if has_unsafe(line):
                    problems.append(
                        f"{label}: {type(widget).__name__}#{widget.id}: raw control in "
                        f"{clean_line(line)[:100]!r}"
                    )
                if line.startswith("<render error"):
                    problems.append(f"{label}: {type(widget).__name__}: {line}")

    async with app.run_test(size=(160, 45)) as pilot:
        waited = 0.0
        while not (app.main.reading.complete or app.main.reading.failed) and waited < 120:
            await pilot.pause(0.05)
            waited += 0.05
        await pilot.pause(0.2)
        walk("first screen")
        turn_list = app.query_one("#turn-list")
        for t in list(app.main.reading.index.turns)[:30]:
            turn_list.select_seq(t.seq)  # type: ignore[attr-defined]
            await pilot.pause(0.05)
            walk(f"turn #{t.seq}")
        for tab in ("growth", "findings", "turn"):
            app.query_one("#tabs").active = tab  # type: ignore[attr-defined]
            await pilot.pause(0.1)
            walk(f"tab {tab}")
        for key in ("n", "n", "space", "right_square_bracket", "space", "a", "question_mark"):
            await pilot.press(key)
            await pilot.pause(0.1)
            walk(f"key {key}")
            if len(app.screen_stack) > 1:
                await pilot.press("escape")
                await pilot.pause(0.05)
        await pilot.press("slash")
        await pilot.pause(0.1)
        await pilot.press(*"[@click")
        await pilot.press("enter")
        await pilot.pause(0.5)
        walk("search")
        await pilot.press("escape")
        await pilot.pause(0.1)
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        walk("command palette")
        await pilot.press("escape")
        await pilot.pause(0.1)
        # Click every widget shown, once, at a cell it owns (an interpreted @click action would
        # fire), until a click shows no widget not clicked yet (a click may show new ones).
        clicked: set[str] = set()
        for _ in range(CLICK_ROUNDS):
            todo = {k: xy for k, xy in owned_cells(app).items() if k not in clicked}
            if not todo or not app.is_running:
                break
            for key, xy in todo.items():
                clicked.add(key)
                if app.is_running:
                    await pilot.click(offset=xy)
        await pilot.pause(0.1)
        unclicked = sorted(set(owned_cells(app)) - clicked) if app.is_running else []
        problems += [f"after clicks: {key} shown, never clicked" for key in unclicked]
        walk("after clicks")
        still_running = app.is_running
        told = [clean_line(str(n.message))[:160] for n in app._notifications]  # the toasts shown
        if app.main.reading.failed:
            told.insert(0, clean_line(app.main.reading.failed)[:160])
        await pilot.press("q")
    if not still_running:
        problems.append("the app stopped while being driven (an interpreted [@click=app.quit]?)")
    if list(shots.iterdir()) or Path(PWNED_DIR).exists() or any(Path.cwd().glob("pwned*.svg")):
        problems.append("a screenshot file was written (an interpreted [@click=app.screenshot])")
    hostile_shown = any("evil" in line for line in seen_text)
    if hostile_shown and not any("[@click=" in line for line in seen_text):
        problems.append(
            "hostile text was shown but its [@click=...] markup was not visible (interpreted?)"
        )
    return problems, told, hostile_shown, len(clicked)


def main() -> int:
    path = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        problems, told, shown, clicked = asyncio.run(drive(path, Path(tmp)))
    for line in told:
        print(f"told: {line}")
    for p in problems:
        print(f"PROBLEM: {p}")
    print(
        f"inspect {path.name}: {len(problems)} problems; hostile text shown: {shown}; "
        f"widgets clicked: {clicked}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
