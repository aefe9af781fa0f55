"""Drive the inspector headless over one file, as a user would, and check what it showed.

    python tests/hostile/drive_inspector.py FILE

Reads the whole file, selects every turn (up to 60), visits every tab, opens the findings, a
search for a hostile string, the help screen and the command palette, replays a turn, and jumps
between findings. Then walks every widget of every screen it visited and checks that:

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


async def drive(path: Path, shots: Path) -> tuple[list[str], list[str], bool]:
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
        # Click every place on the screen once: an interpreted @click action would fire.
        for y in range(1, 45, 4):
            for x in range(2, 160, 16):
                if not app.is_running:
                    break
                await pilot.click(offset=(x, y))
        await pilot.pause(0.1)
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
    return problems, told, hostile_shown


def main() -> int:
    path = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        problems, told, shown = asyncio.run(drive(path, Path(tmp)))
    for line in told:
        print(f"told: {line}")
    for p in problems:
        print(f"PROBLEM: {p}")
    print(f"inspect {path.name}: {len(problems)} problems; hostile text shown: {shown}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
