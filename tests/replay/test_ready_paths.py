"""The ready file's temporary name (issue 28 item 4): it used to be ``.NAME.<pid>.tmp``, opened
``O_CREAT|O_TRUNC``, so a link planted there made the recorder overwrite whatever it pointed to.
Only the interface older versions had is used here (``write_ready(path, ready)``), so the test
also runs against them and fails there. The rest of the policy: tests/cassettes/test_paths.py and
tests/proxy/test_recorder_paths.py."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from looptap.cassettes.replay.testing.ready import SCHEMA, VERSION, Ready, write_ready


def _ready() -> Ready:
    return Ready(
        schema=SCHEMA, version=VERSION, looptap="test", pid=os.getpid(), cassette="/x.jsonl", listen_host="127.0.0.1",  # noqa: E501
        listeners=[], proxy_url="http://127.0.0.1:1", ca_cert="/ca.pem", env={},
    )  # fmt: skip


def test_a_link_planted_at_the_old_predictable_temporary_name_is_not_followed(
    tmp_path: Path,
) -> None:
    """The ready file used to be written through ``.NAME.<pid>.tmp`` opened O_CREAT|O_TRUNC: a link
    planted there made the recorder overwrite the file it pointed to."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    ready = tmp_path / "ready.json"
    for name in (f".ready.json.{os.getpid()}.tmp", ".ready.json.tmp", "ready.json.tmp"):
        (tmp_path / name).symlink_to(victim)
    write_ready(ready, _ready())
    assert victim.read_text() == "precious\n"
    assert (
        json.loads(ready.read_text())["schema"] == SCHEMA
        and stat.S_IMODE(ready.stat().st_mode) == 0o600
    )
    assert not ready.is_symlink() and ready.is_file()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(
        [
            f".ready.json.{os.getpid()}.tmp",
            ".ready.json.tmp",
            "ready.json",
            "ready.json.tmp",
            "victim.txt",
        ]
    )
    # the planted links, untouched
    assert all((tmp_path / n).is_symlink() for n in left if n.endswith(".tmp"))
