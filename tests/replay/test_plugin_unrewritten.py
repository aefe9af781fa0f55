"""The core loads as plain Python in a pytest session, not through pytest's assertion rewriting
(cassettes/replay/testing/_rewrite.py): pytest marks the plugin's whole distribution for
rewriting, which parses and compiles every core module from source in each session where no
``.pyc`` may be written (``PYTHONDONTWRITEBYTECODE``). Checked by each module's loader in a fresh
pytest process that loads the plugin from its entry point, not by time (the figures are
bench/pytest_replay.py's).
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

INNER = """
import sys

def _rewritten():
    return {
        name
        for name, mod in list(sys.modules.items())
        if name.startswith("looptap.cassettes")
        and type(getattr(mod.__spec__, "loader", None)).__name__ == "AssertionRewritingHook"
    }

def test_core_is_not_rewritten():
    import looptap.cassettes.providers
    import looptap.cassettes.replay.serving.server

    looptap.cassettes.providers.detect  # the adapters, as a replay's first request loads them
    rewritten = _rewritten()
    # the session does rewrite the plugin's distribution: the plugin module itself
    assert "looptap.cassettes.replay.testing.plugin" in rewritten
    assert "looptap.cassettes.replay.serving.server" not in rewritten
    assert "looptap.cassettes.providers" not in rewritten
    print("REWRITTEN", sorted(rewritten))
"""


def test_the_core_is_not_assertion_rewritten(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess(
        "-s", "-p", "no:cacheprovider", "-p", "no:textual-snapshot"
    )
    result.assert_outcomes(passed=1)
