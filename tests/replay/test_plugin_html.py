"""The pytest plugin writes a web page of a failed replayed test's run (``looptap export --html``)
and names it in the failure; a passing test gets none."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.replay.test_plugin import NOPLUG, SDK_LOOP, _clean_env, _inner

pytest_plugins = ["pytester"]
__all__ = ["_clean_env"]  # the environment scrub of test_plugin, autouse here too

CHANGED = '''

@pytest.mark.looptap("cassettes/loop.jsonl")
def test_changed(looptap):
    global RESULT
    RESULT = "rainy, 9 C"  # the tool now returns something else: a replay miss at turn 1
    try:
        agent()
    finally:
        RESULT = "sunny, 21 C"
'''


def test_a_failed_test_names_a_web_page_of_its_run_a_passing_one_gets_none(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("openai")
    pytest.importorskip("jinja2")
    _inner(pytester, SDK_LOOP + CHANGED)
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    pages = re.findall(r"looptap: the run as a web page: (\S+\.html)", out)
    assert len(pages) == 1 and pages[0].endswith("test_inner.py_test_changed.html"), out
    page = Path(pages[0]).read_text()
    assert "Content-Security-Policy" in page and 'id="looptap-data"' in page
    assert "<title>looptap · test_inner.py::test_changed (loop.jsonl)</title>" in page


def test_without_pytests_cache_a_session_keeps_its_pages_in_one_temporary_folder(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-p no:cacheprovider``: the pages go to a temporary folder, one per session (it was one
    per failed test, each left in the temp dir)."""
    import tempfile

    pytest.importorskip("openai")
    pytest.importorskip("jinja2")
    tmp = pytester.path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    _inner(
        pytester, SDK_LOOP + CHANGED + CHANGED.replace("def test_changed", "def test_changed_too")
    )
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1, failed=2)
    pages = re.findall(r"looptap: the run as a web page: (\S+\.html)", result.stdout.str())
    assert len(pages) == 2 and len({Path(p).parent for p in pages}) == 1, pages
    assert [p.name for p in tmp.iterdir()] == [Path(pages[0]).parent.name]
    # each failed test's page, and what the test sent (for looptap rules propose) beside it
    assert sorted(p.name for p in Path(pages[0]).parent.iterdir()) == [
        "test_inner.py_test_changed.html",
        "test_inner.py_test_changed.jsonl",
        "test_inner.py_test_changed_too.html",
        "test_inner.py_test_changed_too.jsonl",
    ]
