"""Issue 101, item 1: the command's output ``looptap run --inspect`` keeps beside the cassette
(``RUN.jsonl.log``, so that it does not draw over the inspector) reaches the file as the redactor
passes it. Before (f29135f5) the child wrote to the log directly: what the agent printed (a URL's
password, a key) was on disk as printed. The copy is proven here on the pipe the child is given,
in the recorder's environment; tests/proxy/test_run_inspect.py runs the whole ``--inspect`` path."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.recorder import PROXY_PYTHON, needs_recorder

pytestmark = needs_recorder

KEY = "sk-proj-" + "Qw8Lm2Zx9Rt4Vb7Np3Ks6Hd1Fg5Jc0Ye" * 2

DRIVER = r"""
import os, subprocess, sys
from types import SimpleNamespace
from looptap.cassettes.storage import private_open
from looptap.proxy.session import _sealed_log

path, child = sys.argv[1], sys.argv[2]
config = SimpleNamespace(redact_headers=(), redact_patterns=("corp-[0-9a-f]{12}",))
out, copy = _sealed_log(config, private_open(path, append=True))
rc = subprocess.run([sys.executable, "-c", child], stdout=out, stderr=out).returncode
os.close(out)
copy.join()
sys.exit(rc)
"""


def test_the_childs_output_reaches_its_log_redacted(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl.log"
    child = (
        f"import sys; print('using {KEY}'); print('postgres://app:Hx82kq0Lw@db/x'); "
        "print('corp-0123456789ab', file=sys.stderr, flush=True); print('done')"
    )
    proc = subprocess.run(
        [str(PROXY_PYTHON), "-c", DRIVER, str(path), child], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    text = path.read_text()
    assert KEY[:16] not in text and "Hx82kq0Lw" not in text and "0123456789ab" not in text
    assert sorted(text.splitlines()) == sorted(
        ["using [REDACTED]", "postgres://app:[REDACTED]@db/x", "[REDACTED]", "done"]
    )
    assert path.stat().st_mode & 0o777 == 0o600
