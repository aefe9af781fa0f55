"""The HTML report (``looptap export --html``) opened in headless Chromium: the demo run and a
1,000-turn run render (turn count, a finding's text, the growth chart), with screenshots; script
injected by a recording (``<script>``, ``<img onerror>``, ``</script>``, ``<svg onload>``) never
runs, compressed or not; the page raises no Content-Security-Policy violation and no error.

Chromium is the system's (Debian's ``chromium``; ``.ci/run`` installs it as root), driven by
Playwright's Python client with ``executable_path``: Playwright's own browser download is never
used. Without either the tests skip saying which is missing. Waits have no time limit (a loaded
machine is slow, not hung). Size and time to first paint: ``bench/html_report.py``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.reading import Run, open_run
from looptap.cassettes.views.report import report_data
from tests.interop.html_runs import PAYLOADS, hostile_run, long_exchanges

pytest.importorskip("jinja2", reason="the html extra (jinja2) is not installed")
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright (the test extra) is not installed"
)

from looptap.cassettes.views.htmlpage import render_html  # noqa: E402


def chromium() -> str | None:
    """The system's Chromium: $LOOPTAP_CHROMIUM, else chromium or chromium-browser on PATH."""
    given = os.environ.get("LOOPTAP_CHROMIUM")
    if given:
        return given if Path(given).exists() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


#: Records what the page's own listener sees: CSP violations, errors (before any page script runs).
WATCH = """
window.__csp = [];
window.__errors = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + (e.sample || '')));
window.addEventListener('error', e => window.__errors.push(String(e.message)));
"""  # noqa: E501


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    exe = chromium()
    if exe is None:
        pytest.skip(
            "no Chromium: install Debian's chromium (apt-get install chromium; .ci/run does as "
            "root) or set LOOPTAP_CHROMIUM"
        )
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield b
        finally:
            b.close()


def open_page(browser: Any, path: Path) -> Any:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(0)  # no wall-clock limit: progress, not time, tells a hang
    page.add_init_script(WATCH)
    logged: list[str] = []
    page.on(
        "console",
        lambda m: logged.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None,
    )
    page.on("pageerror", lambda e: logged.append(f"pageerror: {e}"))
    page.goto(path.as_uri())  # returns at the load event: the page's script has run, or never will
    assert page.evaluate("document.body.dataset.ready") is not None, "the page's script did not run"
    page.wait_for_selector('body:not([data-ready="reading"])')  # reading the data ends, well or not
    page.logged = logged
    assert page.evaluate("document.body.dataset.ready") == "1", page.text_content("#summary")
    return page


def clean_run(page: Any) -> None:
    """No CSP violation (so the page's own script and style and uPlot all run under the policy),
    no error, nothing logged."""
    assert page.evaluate("window.__csp") == []
    assert page.evaluate("window.__errors") == []
    assert page.logged == []


def shot(page: Any, path: Path) -> None:
    page.screenshot(path=str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def write_page(run_path: Path, out: Path, compress: bool | None = None) -> Path:
    out.write_text(render_html(report_data(open_run(run_path)), compress=compress))
    return out


def test_demo_run(browser: Any, demo_cassette: Path, tmp_path: Path) -> None:
    page = open_page(browser, write_page(demo_cassette, tmp_path / "demo.html"))
    assert page.locator("#turnlist .row").count() == 11
    assert "11 turns · 4 conversations" in page.text_content("#summary")
    # The first turn is shown: its messages, what it appended marked NEW, the three layers.
    detail = page.text_content("#detail")
    assert "What is the current exchange rate from USD to EUR?" in detail and "▌ NEW" in detail
    for pane in (
        "E — what the model emitted",
        "A — what the API reported",
        "C — what the client dispatched",
    ):
        assert pane in detail
    shot(page, tmp_path / "turns.png")
    # The turn with the E finding: its badge is a warning, its E pane says why.
    row = page.locator("#turnlist .row", has=page.locator(".badge.warning"))
    assert row.count() == 1
    row.click()
    assert "E.arguments_schema" in page.text_content("#detail .layer-E")
    page.click("#tab-findings")
    lines = page.locator("#findings-list .finding")
    assert lines.count() == 4
    assert lines.nth(0).text_content().startswith("▲ E E.arguments_schema")
    assert "caused by E.arguments_schema on #4" in lines.nth(1).text_content()
    assert "does not match the tool's schema" not in lines.nth(1).text_content()
    shot(page, tmp_path / "findings.png")
    lines.nth(1).click()  # a finding opens its turn
    assert page.text_content("#detail h2").startswith("#5 · c2 turn 2")
    page.click("#tab-growth")
    page.wait_for_selector("#growth canvas")
    assert "Token-cost growth · conversation c1 · 3 turns" in page.text_content("#growth h2")
    assert "cumulative cost" in page.text_content("#growth")
    shot(page, tmp_path / "growth.png")
    clean_run(page)
    page.close()


@pytest.fixture(scope="module")
def long_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("long")
    # 40 conversations of 25 turns: 1,000 turns at a quarter of the parsing 10 × 100 costs (each
    # request re-sends its history), analysed in memory (the page of a cassette of the same run is
    # the same: the demo's is read from its file); bench/html_report.py measures 10 × 100 from disk.
    run = Run.of(long_exchanges(conversations=40, turns=25), "long.jsonl")
    out = d / "long.html"
    out.write_text(render_html(report_data(run)))
    return out


def test_a_thousand_turn_run(browser: Any, long_page: Path, tmp_path: Path) -> None:
    assert '{"gzip":' in long_page.read_text()[-400_000:], (
        "a large run's data is embedded compressed"
    )
    page = open_page(browser, long_page)
    assert "1,000 turns · 40 conversations" in page.text_content("#summary")
    assert page.locator("#turnlist .row").count() == 200, "a page of turns at a time"
    assert "page 1 of 5 (1,000 turns)" in page.text_content("#turnlist .pager")
    shot(page, tmp_path / "long-turns.png")
    for _ in range(4):
        page.click("#turnlist .pager button:last-child")
    rows = page.locator("#turnlist .row")
    assert rows.count() == 200 and rows.last.text_content().startswith("#999 c40/24")
    rows.last.click()
    detail = page.text_content("#detail")
    assert "Messages the model saw (50)" in detail and "show the 30 older messages" in detail
    page.click("#detail button.more")
    assert page.locator("#detail .msg").count() == 50
    page.select_option("#conversation", "c3")
    assert page.locator("#turnlist .row").count() == 25
    page.click("#tab-growth")
    page.wait_for_selector("#growth canvas")
    assert "conversation c3 · 25 turns" in page.text_content("#growth h2")
    shot(page, tmp_path / "long-growth.png")
    clean_run(page)
    page.close()


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "compressed"])
def test_script_from_a_recording_never_runs(browser: Any, tmp_path: Path, compress: bool) -> None:
    html = write_page(
        hostile_run(tmp_path / "hostile.jsonl"), tmp_path / "hostile.html", compress=compress
    )
    page = open_page(browser, html)
    for row in range(page.locator("#turnlist .row").count()):  # every turn drawn, every message
        page.locator("#turnlist .row").nth(row).click()
        text = page.text_content("#detail")
        for payload in PAYLOADS[:3]:
            assert payload in text, "shown as text"
    page.click("#tab-findings")
    page.click("#tab-growth")
    page.wait_for_selector("#growth canvas")
    ran = page.evaluate(
        "['__pwned_script', '__pwned_img', '__pwned_close', '__pwned_svg', "
        "'__pwned_entity'].filter(k => k in window)"
    )
    assert ran == []
    assert page.title() == "looptap · hostile.jsonl"
    assert page.evaluate("document.scripts.length") == 2
    assert (
        page.evaluate(
            "document.querySelectorAll('body img, body svg, body iframe, body object').length"
        )
        == 0
    )
    shot(page, tmp_path / "hostile.png")
    clean_run(page)
    # The policy is in force: a script put into the page later (as a break-out would) is refused.
    ran = page.evaluate(
        "(() => { const s = document.createElement('script'); s.textContent = 'window.__late = 1'; "
        "document.body.appendChild(s); return '__late' in window; })()"
    )
    assert ran is False  # an inline script runs as it is inserted: it would be set by now
    page.wait_for_function("window.__csp.length > 0")  # the refusal is reported (it was refused)
    assert page.evaluate("window.__csp")[0].startswith("script-src")
    page.close()


def test_a_400_turn_reads_as_one_and_the_page_opens_there(browser: Any, demo_cassette: Path,
                                                         tmp_path: Path) -> None:  # fmt: skip
    """Issue 71 item 12: a 400 turn's row read "error error -→-" (the error flag, the finish
    reason "error", tokens the API never reported), and the page opened at the first turn, not
    the one that failed."""
    from tests.support.failed_turn import with_a_400

    run = with_a_400(demo_cassette, tmp_path / "failed.jsonl")
    assert report_data(open_run(run))["open"] == 2
    page = open_page(browser, write_page(run, tmp_path / "failed.html"))
    opened = page.locator('#turnlist .row[aria-selected="true"]')
    assert opened.get_attribute("data-seq") == "2"
    fin = opened.locator(".fin").text_content()
    assert fin == "HTTP 400", fin
    assert page.text_content("#detail h2").startswith("#2 ")
    clean_run(page)
    page.close()
