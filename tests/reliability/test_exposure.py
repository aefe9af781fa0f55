"""The recorder listens on loopback only, unless told otherwise — and then it says so.

Every listening socket the ``looptap record`` process owns is found through ``/proc/<pid>/fd`` and
``/proc/net/{tcp,tcp6,udp,udp6}`` (not only the ports it announces), and a connection to the
machine's non-loopback address on those ports is tried.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.recorder import RecorderProcess
from tests.support.reliability import needs_recorder
from tests.support.upstream import FakeUpstream

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc"),
]


def _socket_inodes(pid: int) -> set[int]:
    out = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def _addr(hexaddr: str) -> tuple[str, int]:
    ip, port = hexaddr.split(":")
    raw = bytes.fromhex(ip)
    if len(raw) == 4:
        host = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:  # /proc prints IPv6 as four little-endian 32-bit words
        host = socket.inet_ntop(
            socket.AF_INET6, b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
        )
    return host, int(port, 16)


def listening(pid: int) -> list[tuple[str, str, int]]:
    """(protocol, address, port) of every listening TCP socket and bound UDP socket of ``pid``."""
    inodes = _socket_inodes(pid)
    found = []
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        path = Path(f"/proc/net/{proto}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            f = line.split()
            local, state, inode = f[1], f[3], int(f[9])
            if inode in inodes and (proto.startswith("udp") or state == "0A"):  # 0A: LISTEN
                host, port = _addr(local)
                found.append((proto, host, port))
    return found


def _non_loopback_address() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


def _connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def upstream() -> FakeUpstream:  # type: ignore[misc]
    with FakeUpstream() as up:
        yield up


def test_listeners_bind_loopback_by_default(upstream: FakeUpstream, tmp_path: Path) -> None:
    with RecorderProcess(tmp_path / "run.jsonl", tmp_path / "conf", upstream.url) as rec:
        socks = listening(rec.pid)
        announced = set(rec.ports().values())
        assert announced <= {p for _, _, p in socks}, (announced, socks)
        exposed = [s for s in socks if s[1] not in ("127.0.0.1", "::1")]
        assert not exposed, f"listening beyond loopback: {exposed}"
        assert not [s for s in socks if s[0].startswith("udp")], (
            f"UDP listeners (HTTP/3) open: {socks}"
        )
        other = _non_loopback_address()
        if other is not None:
            for port in announced:
                assert not _connects(other, port), f"port {port} answers on {other}"
            assert _connects("127.0.0.1", rec.port())
        assert "warning" not in rec.output.lower()
        for var, value in rec.env.items():
            if value.startswith("http://"):
                assert urlsplit(value).hostname == "127.0.0.1", (var, value)


def test_listening_elsewhere_needs_the_flag_and_warns(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    with RecorderProcess(
        tmp_path / "run.jsonl", tmp_path / "conf", upstream.url, "--listen-host", "0.0.0.0"
    ) as rec:
        assert "warning" in rec.output.lower() and "0.0.0.0" in rec.output, rec.output
        socks = listening(rec.pid)
        announced = set(rec.ports().values())
        assert {p for _, h, p in socks if h == "0.0.0.0"} >= announced, socks
        other = _non_loopback_address()
        if other is not None:
            assert _connects(other, rec.port()), (
                "bound 0.0.0.0 but not reachable on the machine's address"
            )
        # The exported environment still points the agents at loopback.
        assert urlsplit(rec.env["OPENAI_BASE_URL"]).hostname == "127.0.0.1", rec.env
