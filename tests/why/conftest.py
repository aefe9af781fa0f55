"""tests/why's shared fixtures (tests/why/c_case.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.recorder import RECORDER
from tests.support.scripted import ScriptedUpstream
from tests.why.c_case import CInvestigation, Meeting, Sentinel, investigate


@pytest.fixture(scope="session")
def c_investigation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CInvestigation]:
    """The C case recorded and investigated once a session (tests/why/c_case.py), the fake and
    the sentinel up until the session ends."""
    if RECORDER[0] == "None":
        pytest.skip("no recorder environment")
    sentinel = Sentinel()
    try:
        meeting, tmp = Meeting(), tmp_path_factory.mktemp("why-c-investigation")
        with ScriptedUpstream(meeting) as fake:
            yield investigate(tmp, fake, meeting, sentinel)
    finally:
        sentinel.close()
