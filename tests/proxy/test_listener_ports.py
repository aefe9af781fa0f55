"""Every listener of one recorder gets a port of its own.

Found in a CI run under load: ``free_port`` tests a random port by binding it and lets it go, so
two draws for one recorder could return the same port. With the client matrix's upstreams all on
one fake (the same URL), the two listeners then had the same mitmproxy mode spec, mitmproxy kept
one of them, and ``looptap run`` stopped with "mitmproxy cannot listen as asked". Here every draw
returns the same free port."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.recorder import PROXY_PYTHON, clean_env, needs_recorder

pytestmark = needs_recorder

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, socket
from pathlib import Path
import random
import looptap.proxy.config as config

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]

class SameEveryTime:
    def randrange(self, a, b):
        return port

random.SystemRandom = SameEveryTime
fake = "http://127.0.0.1:9"
cfg = config.RecorderConfig(output=Path("x.jsonl"), upstreams={n: fake for n in config.REVERSE_UPSTREAMS})
print(json.dumps([[lst.spec, lst.port] for lst in cfg.listeners()]))
"""  # noqa: E501


def test_each_listener_of_a_recorder_has_its_own_port() -> None:
    out = subprocess.run(
        [str(PROXY_PYTHON), "-c", SCRIPT],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=clean_env(),
        check=True,
    )
    listeners = json.loads(out.stdout)
    assert len(listeners) >= 3
    ports = [port for _, port in listeners]
    assert len(set(ports)) == len(ports), listeners
    specs = [spec for spec, _ in listeners]
    assert len(set(specs)) == len(specs), listeners


STOLEN = r"""
import asyncio, json, socket, sys
from pathlib import Path
from looptap.cassettes.net import free_port
import looptap.proxy.config as config
import looptap.proxy.launcher as launcher

tmp = Path(sys.argv[1])
# Someone binds the first port looptap draws between its test and mitmproxy's bind (another
# recorder choosing at the same moment): here the draw returns a port this script listens on.
thief = socket.socket()
thief.bind(("127.0.0.1", 0))
thief.listen()
stolen = thief.getsockname()[1]
real = free_port
draws = []

def racing(avoid=()):
    port = stolen if not draws else real(avoid)
    draws.append(port)
    return port

config.free_port = launcher.free_port = racing
base = int(sys.argv[2])

async def main():
    cfg = config.RecorderConfig(output=tmp / "run.jsonl", confdir=tmp / "conf", base_port=stolen if base else 0)
    rec = launcher.Recorder(cfg)
    try:
        await rec.start()
    except launcher.BusyPort as exc:
        return {"refused": str(exc)}
    try:
        ready = rec.ready()
        listening = []
        for lst in ready["listeners"]:
            with socket.create_connection(("127.0.0.1", lst["port"]), timeout=10):
                listening.append(lst["port"])
        return {"stolen": stolen, "ports": [lst["port"] for lst in ready["listeners"]], "listening": listening,
                "env": sorted(v for k, v in rec.env.items() if k.endswith("_BASE_URL") or k == "HTTPS_PROXY")}
    finally:
        await rec.stop()

print(json.dumps(asyncio.run(main())))
"""  # noqa: E501


def test_a_port_taken_after_it_was_drawn_is_drawn_again(tmp_path: Path) -> None:
    """Found in CI under load: two recorders drew the same free port at once and the second
    ``looptap run`` stopped with "cannot listen on 127.0.0.1:N: address already in use". A port
    looptap chose gets another draw; the listener, the ready file and the exported URLs all say the
    port it got. The real recorder on real sockets."""
    out = subprocess.run(
        [str(PROXY_PYTHON), "-c", STOLEN, str(tmp_path), "0"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=clean_env(),
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["stolen"] not in got["ports"], got
    assert got["listening"] == got["ports"] and len(set(got["ports"])) == len(got["ports"]), got
    for url in got["env"]:
        assert not url.startswith(f"http://127.0.0.1:{got['stolen']}"), got
    assert {int(u.split(":")[2].split("/")[0]) for u in got["env"]} <= set(got["ports"]), got
    assert "address already in use" not in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_port_the_user_named_is_never_changed(tmp_path: Path) -> None:
    out = subprocess.run(
        [str(PROXY_PYTHON), "-c", STOLEN, str(tmp_path), "1"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=clean_env(),
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["refused"].startswith("cannot listen on 127.0.0.1:") and got["refused"].endswith(
        "address already in use"
    ), got
