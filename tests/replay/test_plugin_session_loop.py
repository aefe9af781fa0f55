"""One event loop per pytest session hosts every replayed test's server
(cassettes/replay/testing/_loop.py), and each test keeps its own server, port and cassette: a test
that fails with a request left hanging leaves nothing behind for the next one, and a loop that a
bug blocks is replaced, not waited for by every test after it.
"""

from __future__ import annotations

import asyncio
import textwrap
import threading

import pytest

from cassettes.replay.testing import SessionLoop
from tests.replay.conftest import tool_loop, write
from tests.replay.test_plugin import NOPLUG, SDK_LOOP, _clean_env  # noqa: F401 (autouse fixture)

pytest_plugins = ["pytester"]

TESTS = """
import socket
import threading

HELD = {}

def _loop_threads():
    return [t for t in threading.enumerate() if t.name == "looptap replay"]

@pytest.mark.looptap("cassettes/loop.jsonl")
def test_1_fails_with_a_request_left_hanging(looptap):
    host, port = looptap.url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)))
    # a head that promises a body never sent: the server's handler waits in its read
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\\r\\nHost: x\\r\\n"
              b"Content-Length: 100\\r\\n\\r\\n{")
    HELD.update(sock=s, address=(host, int(port)), threads=_loop_threads())
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
    # one loop on one thread for the session, started by the first replay
    assert len(HELD["threads"]) == 1 and _loop_threads() == HELD["threads"]
"""


def test_a_failed_test_with_a_hanging_request_leaves_the_next_one_alone(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("openai")
    pytester.makepyfile(test_inner=textwrap.dedent(SDK_LOOP.split("@pytest.mark")[0]) + TESTS)
    (pytester.path / "cassettes").mkdir()
    write(pytester.path / "cassettes" / "loop.jsonl", tool_loop())
    result = pytester.runpytest_subprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: this test fails with a request left hanging"])


def test_a_blocked_loop_is_replaced_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A coroutine that blocks the loop's thread (a bug: nothing in the server does) makes
    :meth:`SessionLoop.run` give up and the next call get a new loop; the blocked one ends when
    released. Only the wait that cannot succeed (the event is unset until the end) gets a short
    ceiling; the calls that must succeed keep the default one."""
    loop = SessionLoop()
    release = threading.Event()

    async def blocks() -> None:
        release.wait()

    async def answers() -> threading.Thread:
        await asyncio.sleep(0)
        return threading.current_thread()

    first = loop.run(answers())
    try:
        with monkeypatch.context() as m:
            m.setitem(SessionLoop.run.__globals__, "WEDGED_AFTER", 0.2)  # the module's ceiling
            with pytest.raises(RuntimeError, match="did not answer"):
                loop.run(blocks())
        second = loop.run(answers())
        assert second is not first and second.name == first.name == "looptap replay"
    finally:
        release.set()
        loop.stop()
    first.join()
    assert not first.is_alive()
