"""The HTML report (``looptap export --html``): file size and time to first paint, measured.

For the demo run (the bundled example, 11 turns) and a 1,000-turn run (10 conversations of 100
turns, a tool loop whose requests re-send their history: tests/interop/html_runs.py), written as
cassettes and read back as ``looptap export --html`` reads them:

- the time to build the page (read and analyse the run, its data, the page), in this process;
- the page's size as written (data compressed when that pays) beside the size with the data
  embedded as plain JSON, and their ratio;
- opened in headless Chromium (the system's, through Playwright's client): first paint and first
  contentful paint (``performance.getEntriesByType('paint')``) and the time the page is ready
  (turn list and first turn drawn: the ``looptap-ready`` mark), the median of ``--loads`` loads.

    python bench/html_report.py            # prints the table
    python bench/html_report.py --write    # and writes docs/html-report.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from looptap.cassettes.reading import open_run  # noqa: E402
from looptap.cassettes.views.htmlpage import render_html  # noqa: E402
from looptap.cassettes.views.report import report_data  # noqa: E402
from tests.interop.cassette_files import write_cassette  # noqa: E402
from tests.interop.html_runs import long_run  # noqa: E402


def build(run_path: Path, out: Path) -> dict[str, Any]:
    t = time.perf_counter()
    data = report_data(open_run(run_path))
    page = render_html(data)
    took = time.perf_counter() - t
    out.write_text(page)
    plain = render_html(data, compress=False)
    return {
        "turns": data["totals"]["turns"],
        "build_s": took,
        "bytes": len(page.encode()),
        "plain_bytes": len(plain.encode()),
    }


def paint(browser: Any, page_path: Path, loads: int) -> dict[str, float]:
    rows: list[dict[str, float]] = []
    for _ in range(loads):
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(0)
        page.goto(page_path.as_uri())
        page.wait_for_selector('body[data-ready="1"]')
        got = page.evaluate(
            "(() => { const p = Object.fromEntries(performance.getEntriesByType('paint').map(e => "
            "[e.name, e.startTime])); const r = performance.getEntriesByName('looptap-ready')[0];"
            " return {fp: p['first-paint'], fcp: p['first-contentful-paint'], ready: r ? "
            "r.startTime : null}; })()"
        )
        rows.append(got)
        page.close()
    return {
        k: statistics.median(r[k] for r in rows if r[k] is not None) for k in ("fp", "fcp", "ready")
    }


def screenshots(
    browser: Any, demo_page: Path, long_page: Path, folder: Path
) -> list[tuple[str, str]]:
    """The demo's turn and findings views and the 1,000-turn run's last turn and growth chart."""
    folder.mkdir(parents=True, exist_ok=True)
    shots: list[tuple[str, str]] = []

    def take(page: Any, name: str, caption: str) -> None:
        page.screenshot(path=str(folder / name))
        shots.append((f"html-report/{name}", caption))

    page = browser.new_page(viewport={"width": 1280, "height": 760})
    page.set_default_timeout(0)
    page.goto(demo_page.as_uri())
    page.wait_for_selector('body[data-ready="1"]')
    page.locator("#turnlist .row", has=page.locator(".badge.warning")).click()
    take(
        page,
        "demo-turn.png",
        "The demo run: the turn whose tool call broke its "
        "schema (E warning), its messages and E/A/C panes",
    )
    page.click("#tab-findings")
    take(
        page,
        "demo-findings.png",
        "Findings, root cause first, the consequence under it with caused by",
    )
    page.close()
    page = browser.new_page(viewport={"width": 1280, "height": 760})
    page.set_default_timeout(0)
    page.goto(long_page.as_uri())
    page.wait_for_selector('body[data-ready="1"]')
    page.click("#tab-growth")
    page.wait_for_selector("#growth canvas")
    take(page, "long-growth.png", "1,000 turns: token-cost growth of a 100-turn conversation")
    page.close()
    return shots


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--write", action="store_true", help="write docs/html-report.md")
    ap.add_argument("--loads", type=int, default=5, help="page loads per run (median)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    exe = (
        os.environ.get("LOOPTAP_CHROMIUM")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
    )
    if exe is None:
        sys.exit("no chromium (apt-get install chromium, or set LOOPTAP_CHROMIUM)")
    results: list[tuple[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="looptap-bench-html-") as tmp:
        d = Path(tmp)
        with as_file(files("looptap.cassettes").joinpath("examples/tool_loop_anthropic.yaml")) as src:  # noqa: E501
            demo = write_cassette(Path(src), d / "demo.jsonl")
        runs = [("demo (11 turns)", demo), ("1,000 turns (10 × 100)", long_run(d / "long.jsonl"))]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
            for name, path in runs:
                out = d / (path.stem + ".html")
                row = build(path, out)
                row["cassette_bytes"] = path.stat().st_size
                row.update(paint(browser, out, args.loads))
                results.append((name, row))
                print(name, row, file=sys.stderr)
            version = browser.version
            shots = (
                screenshots(
                    browser, d / "demo.html", d / "long.html", ROOT / "docs" / "html-report"
                )
                if args.write
                else []
            )
            browser.close()
    head = (
        "| run | cassette | page | page, data not compressed | ratio | build | first paint | first "
        "contentful paint | ready |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in results:
        lines.append(
            f"| {name} | {r['cassette_bytes'] / 1024:,.0f} KB | {r['bytes'] / 1024:,.0f} KB | "
            f"{r['plain_bytes'] / 1024:,.0f} KB | {r['plain_bytes'] / r['bytes']:.1f}× | "
            f"{r['build_s']:.1f} s | {r['fp']:.0f} ms | {r['fcp']:.0f} ms | {r['ready']:.0f} ms |"
        )
    table = "\n".join(lines)
    print(table)
    if args.write:
        doc = ROOT / "docs" / "html-report.md"
        doc.write_text(
            "# The HTML report: measured\n\n"
            f"Generated by `python bench/html_report.py --write` on {datetime.date.today()} "
            f"({platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"Chromium {version}, headless; a shared machine: compare the rows with each other, "
            "not with another machine). What is measured: the docstring of "
            "`bench/html_report.py`; what the page shows: "
            "[interop](interop.md#a-run-as-a-web-page-export---html).\n\n"
            + table
            + "\n\nSizes are of the whole file (its script, styles and the uPlot chart library "
            "included, about 60 KB). Times are medians of page loads from disk; *ready* is when "
            "the turn list and the first turn are drawn.\n"
            + "".join(f"\n![{caption}]({path})\n" for path, caption in shots)
        )
        print(f"wrote {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
