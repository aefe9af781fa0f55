"""Each replayed test keeps its own server, port and cassette: a test that fails with a request
left hanging leaves nothing behind for the next one.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.replay.conftest import tool_loop, write
from tests.replay.test_plugin import NOPLUG, SDK_LOOP, _clean_env  # noqa: F401 (autouse fixture)

pytest_plugins = ["pytester"]

TESTS = """
import socket

HELD = {}

@pytest.mark.looptap("cassettes/loop.jsonl")
def test_1_fails_with_a_request_left_hanging(looptap):
    host, port = looptap.url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)))
    # a head that promises a body never sent: the server's handler waits in its read
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\\r\\nHost: x\\r\\n"
              b"Content-Length: 100\\r\\n\\r\\n{")
    HELD.update(sock=s, address=(host, int(port)))
    assert agent() == "It is sunny in Paris."
    raise AssertionError("this test fails with a request left hanging")

@pytest.mark.looptap("cassettes/loop.jsonl")
def test_2_replays_as_if_alone(looptap):
    assert agent() == "It is sunny in Paris."
    assert looptap.url != "http://%s:%d" % HELD["address"]
    # the test before's server is gone: its port refuses, its hanging connection was closed
    # (the timeout only ends a hang; what is asserted is what was read)
    try:
        socket.create_connection(HELD["address"]).close()
        refused = False
    except ConnectionRefusedError:
        refused = True
    assert refused
    HELD["sock"].settimeout(120)
    assert HELD["sock"].recv(1024) == b""
"""


def test_a_failed_test_with_a_hanging_request_leaves_the_next_one_alone(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("openai")
    pytester.makepyfile(test_inner=textwrap.dedent(SDK_LOOP.split("@pytest.mark")[0]) + TESTS)
    (pytester.path / "cassettes").mkdir()
    write(pytester.path / "cassettes" / "loop.jsonl", tool_loop())
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: this test fails with a request left hanging"])
