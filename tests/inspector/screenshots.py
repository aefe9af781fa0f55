"""Regenerate the inspector's pictures in docs/ (docs/inspector/*.svg, shown by docs/inspector.md
and the README): every tab, the help and the search, at 160×45, 100×30 and 80×24. Not a test::

    .venv/bin/python tests/inspector/screenshots.py

The snapshot tests (tests/inspector/test_snapshots.py) check the same screens on every run.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fixture_run
import fork_fixture
from helpers import loaded, until

from looptap.cassettes.cli import main as looptap
from looptap.inspector.app import build_app
from looptap.inspector.widgets import TurnList

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "inspector"
SIZES = {"wide": (160, 45), "narrow": (100, 30), "compact": (80, 24)}


async def shot(
    path: Path, size: tuple[int, int], seq: int, keys: tuple[str, ...], out: str
) -> None:
    app = build_app(path)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        app.query_one(TurnList).select_seq(seq)
        await until(pilot, lambda: app.main.reading.request_of == seq)
        for k in keys:
            await pilot.press(k)
        await pilot.pause(0.5)
        app.save_screenshot(filename=out, path=str(OUT))
        print(OUT / out)


async def fork_shot(path: Path, size: tuple[int, int], out: str) -> None:
    app = build_app(path)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        await until(
            pilot,
            lambda: bool(app.query("#fork-view")) and app.query_one("#fork-view")._view is not None,
        )  # type: ignore[attr-defined]
        await pilot.press("4")
        await pilot.pause(0.5)
        app.save_screenshot(filename=out, path=str(OUT))
        print(OUT / out)


async def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        demo = Path(tmp) / "looptap-demo.jsonl"
        src = ROOT / "cassettes" / "examples" / "tool_loop_anthropic.yaml"
        assert looptap(["import", str(src), "-o", str(demo), "-q"]) == 0
        run = fixture_run.write(Path(tmp) / "run.jsonl")
        for name, size in SIZES.items():
            await shot(demo, size, 5, (), f"turn-{name}.svg")
            await shot(run, size, 3, (), f"findings-in-turn-{name}.svg")
            await shot(demo, size, 6, ("2",), f"growth-{name}.svg")
            await shot(run, size, 3, ("3", "down", "down"), f"findings-{name}.svg")
            await shot(run, size, 1, ("question_mark",), f"help-{name}.svg")
            await shot(run, size, 1, ("slash", *"weather", "enter"), f"search-{name}.svg")
        # A branch (looptap run --from, a what-if edit) beside its origin: the Fork tab, and the
        # edited message.
        branch = fork_fixture.write(Path(tmp))
        await shot(branch, SIZES["wide"], 0, (), "fork-edited-wide.svg")
        await fork_shot(branch, SIZES["wide"], "fork-wide.svg")


if __name__ == "__main__":
    asyncio.run(main())
