"""Runs the addon's in-process tests (test_addon_inprocess.py, mitmproxy's ``taddons`` / ``tflow``)
in the recorder's environment, where mitmproxy is: the test environment cannot import it
(MITMPROXY.md §0). That environment needs pytest (``.ci/run`` installs it there)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, clean_env, needs_recorder

REPO = Path(__file__).resolve().parents[2]
TESTS = "tests/proxy/test_addon_inprocess.py"


@needs_recorder
@pytest.mark.skipif(
    importlib.util.find_spec("mitmproxy") is not None,
    reason=f"mitmproxy is here: {TESTS} runs in this session",
)
def test_the_addon_in_process_in_the_recorders_environment() -> None:
    probe = subprocess.run([str(PROXY_PYTHON), "-c", "import pytest"], capture_output=True)
    if probe.returncode != 0:
        pytest.fail(
            f"the recorder's environment ({PROXY_PYTHON}) has no pytest: install it there ('uv pip "
            "install pytest'; .ci/run does)"
        )
    # the suite's conftest without the recorder environment's other plugins (0.4 s of CPU fewer)
    proc = progress.run(
        [str(PROXY_PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", TESTS],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=clean_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"),
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    summary = out.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 9, summary
    assert "skipped" not in summary and "deselected" not in summary, summary
