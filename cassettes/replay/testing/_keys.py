"""What the pytest plugin's hooks and the machinery its first test loads share: the record modes
and the keys of what they keep in pytest's stash. A module of its own, below both, so that the
machinery (:mod:`~cassettes.replay.testing._session`, :mod:`~cassettes.replay.testing._report`,
:mod:`~cassettes.replay.testing._options`) never imports the hooks' module back."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ...errors import ReplayMiss

if TYPE_CHECKING:
    from .recorder import SessionRecorder

__all__ = ["MISS", "MODES", "RECORDER", "REPORTS", "REPORTS_DIR"]

#: The record modes, as in pytest-recording (``--looptap-record-mode``).
MODES = ("none", "once", "new_episodes", "all")
RECORDER: pytest.StashKey[SessionRecorder] = pytest.StashKey()
REPORTS = pytest.StashKey[list[str]]()
REPORTS_DIR = pytest.StashKey[Path]()
#: The replay miss that failed the test (its text: :func:`~.report.failure_text`).
MISS = pytest.StashKey[ReplayMiss]()
