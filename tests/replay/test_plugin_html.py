"""The pytest plugin writes a web page of a failed replayed test's run (``looptap export --html``)
and names it in the failure; a passing test gets none."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.replay.test_plugin import NOPLUG, SDK_LOOP, _clean_env, _inner

pytest_plugins = ["pytester"]
__all__ = ["_clean_env"]  # the environment scrub of test_plugin, autouse here too


def test_failed_test_names_a_web_page_of_its_run(pytester: pytest.Pytester) -> None:
    pytest.importorskip("openai")
    pytest.importorskip("jinja2")
    _inner(pytester, SDK_LOOP.replace('RESULT = "sunny, 21 C"', 'RESULT = "rainy, 9 C"'))
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    m = re.search(r"looptap: the run as a web page: (\S+\.html)", out)
    assert m, out
    page = Path(m.group(1)).read_text()
    assert "Content-Security-Policy" in page and 'id="looptap-data"' in page
    assert "<title>looptap · test_inner.py::test_loop (loop.jsonl)</title>" in page
    assert m.group(1).endswith("test_inner.py_test_loop.html")


def test_passing_test_writes_no_page(pytester: pytest.Pytester) -> None:
    pytest.importorskip("openai")
    _inner(pytester)
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1)
    assert "as a web page" not in result.stdout.str()
