"""A replayed test that fails on a replay miss: its web page, ``looptap show`` and the analysis
tell the failure pytest prints — the client's divergence (layer C) at the failing turn, with the
same path and the same differences — and never blame the API (issue 43, item 3).

The replay server answers an unmatched request with an error of its own (so the SDK raises it);
before, the analysis read that answer as the API's (``A.http_error … looptap_replay_miss``), the
page opened on turn 0 with a green C pane, and the failing turn's row read ``error error -→-``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from looptap.cassettes.reading import open_run
from tests.replay.conftest import served_miss_run
from tests.replay.test_plugin import NOPLUG, SDK_LOOP, _clean_env, _inner
from tests.replay.test_plugin_html import CHANGED

pytest_plugins = ["pytester"]
__all__ = ["_clean_env"]  # the environment scrub of test_plugin, autouse here too

#: What the failure names
#: (tests/replay/test_plugin.py::test_changed_agent_fails_naming_turn_path_and_layer).
VERDICT = "C: the tool result for call_A1 changed (messages[3].content)"
CHANGE = 'messages[3].content: recorded "sunny, 21 C", got "rainy, 9 C"'

#: The failing test also keeps what the replay served (its run, as the page shows it) for ``looptap
#: show``.
KEEP_SERVED = CHANGED.replace('''    finally:
        RESULT = "sunny, 21 C"
''', '''    finally:
        RESULT = "sunny, 21 C"
        from looptap.cassettes.recording.pipeline import CassetteWriter
        with CassetteWriter("served.jsonl") as w:
            for ex in looptap.server.served:
                w.append(ex)
''')


def test_a_replay_miss_is_the_clients_divergence_in_the_analysis(tmp_path: Path) -> None:
    run = open_run(served_miss_run(tmp_path / "served.jsonl"), whole=True)
    (finding,) = run.analysis.findings
    assert (finding.code, finding.layer, finding.turn, finding.seq, finding.path) == (
        "C.diverged_from_recording",
        "C",
        1,
        1,
        "messages[3].content",
    )
    assert VERDICT in finding.message and "the API was not asked" in finding.message
    assert finding.details["changes"] == [CHANGE]
    assert finding.details["closest"] == "conversation c1, turn 1 (seq 1)"
    assert not [f for f in run.analysis.findings if f.layer == "A"]


def test_a_forged_or_cut_note_still_reads_as_a_miss_never_as_the_apis_error(tmp_path: Path) -> None:
    """The note is a header of a cassette: untrusted. Unreadable, the miss stays the client's."""
    from looptap.cassettes.recording.pipeline import CassetteWriter

    exchanges = open_run(served_miss_run(tmp_path / "served.jsonl"), whole=True).exchanges
    miss = exchanges[1]
    miss.response_headers = [
        (
            k,
            '{"verdicts": 7, "changes": [1, {"x": 2}], "closest": ["x"]'
            if k == "x-looptap-miss"
            else v,
        )
        for k, v in miss.response_headers
    ]
    with CassetteWriter(tmp_path / "forged.jsonl") as w:
        for ex in exchanges:
            w.append(ex)
    (finding,) = open_run(tmp_path / "forged.jsonl", whole=True).analysis.findings
    assert (finding.code, finding.path, finding.details["changes"]) == (
        "C.diverged_from_recording",
        None,
        [],
    )


def _show(path: Path) -> str:
    """``looptap show PATH``'s output, as a user runs it."""
    import sys

    from tests.support import progress

    done = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "show", str(path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _page_data(out: str) -> tuple[str, dict[str, object]]:
    from tests.interop.test_html_report import page_data

    pages = re.findall(r"looptap: the run as a web page: (\S+\.html)", out)
    assert len(pages) == 1, out
    page = Path(pages[0]).read_text()
    return page, page_data(page)


def test_the_failed_tests_page_shows_the_c_divergence_at_the_failing_turn(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("openai")
    pytest.importorskip("jinja2")
    _inner(pytester, SDK_LOOP + KEEP_SERVED)
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert f"replay miss at conversation c1, turn 1 (seq 1): {VERDICT}" in out and CHANGE in out, (
        out
    )
    _, data = _page_data(out)

    # The finding: the layer, turn, path and change text the failure names; no A finding at all.
    findings = data["findings"]
    assert isinstance(findings, list) and [
        (f["code"], f["layer"], f["turn"], f["seq"], f["path"]) for f in findings
    ] == [("C.diverged_from_recording", "C", 1, 1, "messages[3].content")], findings
    assert VERDICT in findings[0]["message"]
    # The row: a red C badge, a clean A badge, named a replay miss (not "error error -→-").
    turns = data["turns"]
    assert isinstance(turns, list)
    row = turns[1]
    assert row["badges"] == {"E": [None, 0], "A": [None, 0], "C": ["error", 1]}, row
    assert row["miss"] == {"path": "messages[3].content"} and row["error"] is False, row
    # The page opens at the failing turn, whose panes carry the diff the failure printed.
    assert data["open"] == 1
    detail = data["detail"]
    assert isinstance(detail, dict)
    miss = detail["1"]["miss"]
    assert miss["changes"] == [CHANGE] and miss["closest"] == "conversation c1, turn 1 (seq 1)", (
        miss
    )
    assert detail["0"]["miss"] is None and turns[0]["miss"] is None

    # The same run in `looptap show`: the C finding with the diff, no API error line, no A finding.
    text = _show(pytester.path / "served.jsonl")
    assert (
        f"✖ C C.diverged_from_recording: The request diverged from the recording: {VERDICT}."
        in text
    ), text
    assert f"        {CHANGE}" in text
    assert "A.http_error" not in text and "error (HTTP 400)" not in text
    assert "A — API: 0 errors, 0 warnings, 0 info" in text


def test_the_page_in_a_browser_opens_at_the_miss_and_says_what_it_is(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """The same page in headless Chromium (skipped without it, as
    tests/interop/test_html_browser.py)."""
    pytest.importorskip("openai")
    pytest.importorskip("jinja2")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright (the test extra) is not installed"
    )
    from tests.interop.test_html_browser import chromium

    exe = chromium()
    if exe is None:
        pytest.skip("no Chromium: install Debian's chromium or set LOOPTAP_CHROMIUM")
    _inner(pytester, SDK_LOOP + CHANGED)
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1, failed=1)
    pages = re.findall(r"looptap: the run as a web page: (\S+\.html)", result.stdout.str())
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(0)
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(Path(pages[0]).as_uri())
            page.wait_for_selector('body:not([data-ready="reading"])')
            assert page.evaluate("document.body.dataset.ready") == "1" and errors == [], errors
            assert page.text_content("#detail h2").startswith("#1 · c1 turn 1")
            selected = page.text_content('#turnlist .row[aria-selected="true"]')
            assert (
                selected.startswith("#1 c1/1") and "replay miss at messages[3].content" in selected
            ), selected
            rows = [r.text_content() for r in page.locator("#turnlist .row").all()]
            assert not any("error error" in r or "-→-" in r for r in rows), rows
            assert page.locator(
                '#turnlist .row[aria-selected="true"] .badge.error'
            ).all_text_contents() == ["C1"]
            c_pane, a_pane = (
                page.text_content("#detail .layer-C"),
                page.text_content("#detail .layer-A"),
            )
            assert (
                "C.diverged_from_recording" in c_pane and VERDICT in c_pane and CHANGE in c_pane
            ), c_pane
            assert (
                "A.http_error" not in a_pane
                and "looptap_replay_miss" not in a_pane
                and "looptap's replay, not the API" in a_pane
            ), a_pane
        finally:
            browser.close()


def test_the_note_stays_a_small_ascii_header_keeping_the_first_verdict_and_a_change() -> None:
    """Clients cap a response's head (Node's at 16 KiB): a miss with long differences still fits."""
    from looptap.cassettes.wire import MAX_NOTE, Exchange, MissNote, MissVerdict, read_miss

    note = MissNote(
        "c" * 1000,
        "r" * 1000,
        [MissVerdict("C", "v\x1b[31m" * 200, "p" * 500)] * 20,
        ["x\u202e" * 400] * 20,
    )
    value = note.to_header()
    assert len(value) <= MAX_NOTE and value.isascii()
    back = read_miss(
        Exchange(
            "POST",
            "http://127.0.0.1/v1",
            response_headers=[("x-looptap-replay", "miss"), ("x-looptap-miss", value)],
        )
    )
    assert (
        back is not None
        and len(back.verdicts) == 1
        and back.changes
        and "\x1b" not in back.verdicts[0].message
    )
