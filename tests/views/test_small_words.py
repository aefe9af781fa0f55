"""The small words of the HTML page, as Chromium shows it (issue 54, tried as a new user would):
a count agrees with its noun ("1 conversations" was on the page), a conversation's title is cut
with an ellipsis where the menu is too narrow (it was cut mid-word, nothing said), and the growth
chart draws its first and last bars whole (uPlot's x range ended at the first and the last turn:
both bars were cut in half). Skips without Chromium, as tests/interop/test_html_browser.py does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scenarios import WEATHER, Call, Script

pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")

from looptap.cassettes.recording.pipeline import CassetteWriter
from tests.interop.test_html_browser import browser, clean_run, open_page, write_page

__all__ = ["browser"]  # the module's browser fixture, shared

#: A first user message longer than a conversation title (60 characters).
LONG = (
    "Please look up the current weather conditions in Paris, Rome and Oslo and tell me "
    "which city is the warmest today"
)


def _write(path: Path, script: Script) -> Path:
    with CassetteWriter(path, meta={"source": "test"}) as w:
        for ex in script.exchanges:
            w.append(ex)
    return path


def _one_turn(tmp_path: Path) -> Path:
    s = Script("openai_chat", tools=[WEATHER])
    s.user("Hello?")
    s.reply("Hello! How can I help?")
    return _write(tmp_path / "one.jsonl", s)


def _three_turns(tmp_path: Path) -> Path:
    s = Script("openai_chat", tools=[WEATHER])
    s.user(LONG)
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny, 21C")
    s.reply(calls=[Call("get_weather", {"city": "Rome"})])
    s.results("sunny, 25C")
    s.reply("Rome is the warmest today.")
    return _write(tmp_path / "three.jsonl", s)


def test_a_count_agrees_with_its_noun(browser: Any, tmp_path: Path) -> None:
    page = open_page(browser, write_page(_one_turn(tmp_path), tmp_path / "one.html"))
    summary = page.text_content("#summary")
    assert summary.startswith("1 round trip · 1 turn · 1 conversation · "), summary
    assert summary.endswith("findings: 0 errors, 0 warnings, 0 info"), summary
    options = page.locator("#conversation option").all_text_contents()
    assert options[0] == "all conversations (1 turn)", options
    assert options[1].startswith("c1 · 1 turn · openai_chat · "), options
    page.click("#tab-growth")
    assert page.text_content("#growth h2").startswith(
        "Token-cost growth · conversation c1 · 1 turn "
    )
    clean_run(page)


#: The chosen option's text is wider than the menu shows (in the menu's font).
WIDER = """e => {
  const s = document.createElement("span");
  s.style.font = getComputedStyle(e).font;
  s.style.whiteSpace = "pre";
  s.textContent = e.options[e.selectedIndex].text;
  document.body.appendChild(s);
  const wide = s.getBoundingClientRect().width > e.clientWidth;
  s.remove();
  return wide;
}"""


def test_a_long_title_is_cut_at_a_word_with_an_ellipsis(browser: Any, tmp_path: Path) -> None:
    """The core cuts a title at a word and says so (…); where the menu is narrower than the
    option, the title is what is cut (it comes last) and the browser says so (…) too."""
    from looptap.cassettes.reading import open_run

    path = _three_turns(tmp_path)
    (conv,) = open_run(path).analysis.conversations
    assert conv.title is not None and conv.title.endswith("…") and len(conv.title) <= 60
    kept = conv.title.removesuffix("…")
    assert LONG.startswith(kept) and LONG[len(kept)] in " ,;:", conv.title  # whole words
    page = open_page(browser, write_page(path, tmp_path / "three.html"))
    page.set_viewport_size({"width": 700, "height": 900})
    option = page.locator("#conversation option").nth(1).text_content()
    assert option.endswith(f"“{conv.title}”"), option
    menu = page.locator("#conversation")
    assert menu.evaluate("e => getComputedStyle(e).textOverflow") == "ellipsis"
    menu.select_option("c1")
    assert menu.evaluate(WIDER), "the option fits the menu: nothing is cut, nothing to check"
    clean_run(page)


#: The columns of the plot's bottom row of pixels that a bar paints (saturated colours; the grid,
#: the axis and the cost line's anti-aliased edge are greys and pale tints), as runs of columns.
BAR_RUNS = """() => {
  const over = document.querySelector("#growth .u-over").getBoundingClientRect();
  const canvas = document.querySelector("#growth canvas");
  const box = canvas.getBoundingClientRect();
  const sx = canvas.width / box.width, sy = canvas.height / box.height;
  const y = Math.round((over.bottom - box.top - 3) * sy);
  const x0 = Math.round((over.left - box.left) * sx), x1 = Math.round((over.right - box.left) * sx);
  const px = canvas.getContext("2d").getImageData(x0, y, x1 - x0, 1).data;
  const runs = [];
  let start = null;
  for (let i = 0; i <= x1 - x0; i++) {
    const [r, g, b, a] = i < x1 - x0 ? px.slice(4 * i, 4 * i + 4) : [0, 0, 0, 0];
    const bar = a > 200 && Math.max(r, g, b) - Math.min(r, g, b) > 90;
    if (bar && start === null) start = i;
    if (!bar && start !== null) { runs.push([start, i]); start = null; }
  }
  return { runs, width: x1 - x0 };
}"""


def test_the_growth_chart_draws_its_first_and_last_bar_whole(browser: Any, tmp_path: Path) -> None:
    page = open_page(browser, write_page(_three_turns(tmp_path), tmp_path / "three.html"))
    page.click("#tab-growth")
    page.wait_for_selector("#growth canvas")
    got = page.evaluate(BAR_RUNS)
    runs, width = got["runs"], got["width"]
    assert len(runs) == 3, got
    widths = [b - a for a, b in runs]
    assert all(abs(w - widths[1]) <= 2 for w in widths), widths  # was: the outer two half as wide
    assert runs[0][0] > 0 and runs[-1][1] < width, got  # inside the plot, not cut at its edges
    clean_run(page)
