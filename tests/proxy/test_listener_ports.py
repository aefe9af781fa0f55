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
import proxy.launcher as launcher

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]

class SameEveryTime:
    def randrange(self, a, b):
        return port

launcher.random.SystemRandom = SameEveryTime
fake = "http://127.0.0.1:9"
cfg = launcher.RecorderConfig(output=Path("x.jsonl"), upstreams={n: fake for n in launcher.BUILTIN_UPSTREAMS})
print(json.dumps([[lst.spec, lst.port] for lst in cfg.listeners()]))
"""


def test_each_listener_of_a_recorder_has_its_own_port() -> None:
    out = subprocess.run([str(PROXY_PYTHON), "-c", SCRIPT], capture_output=True, text=True, cwd=REPO, env=clean_env(), check=True)
    listeners = json.loads(out.stdout)
    assert len(listeners) >= 3
    ports = [port for _, port in listeners]
    assert len(set(ports)) == len(ports), listeners
    specs = [spec for spec, _ in listeners]
    assert len(set(specs)) == len(specs), listeners
