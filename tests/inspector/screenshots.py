"""Regenerate the README's inspector screenshots (docs/inspector-*.svg). Not a test:

.venv/bin/python tests/inspector/screenshots.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fixture_run
from helpers import loaded, until

from cassettes.cli import main as looptap
from inspector.app import build_app
from inspector.widgets.turn_list import TurnList

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


async def shot(path: Path, seq: int, keys: tuple[str, ...], out: str) -> None:
    app = build_app(path)
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        app.query_one(TurnList).select_seq(seq)
        await until(pilot, lambda: app._loaded == seq)
        for k in keys:
            await pilot.press(k)
        await pilot.pause(0.5)
        app.save_screenshot(filename=out, path=str(DOCS))
        print(DOCS / out)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        demo = Path(tmp) / "looptap-demo.jsonl"
        src = ROOT / "cassettes" / "examples" / "tool_loop_anthropic.yaml"
        assert looptap(["import", str(src), "-o", str(demo), "-q"]) == 0
        run = fixture_run.write(Path(tmp) / "run.jsonl")
        await shot(demo, 5, (), "inspector-main.svg")
        await shot(demo, 6, ("2",), "inspector-growth.svg")
        await shot(run, 3, ("3", "down", "down"), "inspector-findings.svg")


if __name__ == "__main__":
    asyncio.run(main())
