"""Suite-wide: looptap's per-user state (the parse-once key of ``cassettes.parsing.sealed``) lives in a
temporary directory for the session, never in the home of whoever runs the tests. Set in the
environment, so the recorder and every other child process the tests start use it too."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest


def pytest_configure(config: pytest.Config) -> None:
    state = tempfile.mkdtemp(prefix="looptap-test-state-")
    os.environ["LOOPTAP_STATE_DIR"] = state
    config.add_cleanup(lambda: shutil.rmtree(state, ignore_errors=True))
