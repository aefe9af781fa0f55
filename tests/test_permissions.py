"""Every file looptap writes that holds recorded content is readable by its owner only (0600),
from the moment it exists: cassettes, exports (OTLP, HAR), imports, the recorder's child log."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import orjson

from looptap.cassettes.cli import main
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import private_open, write_private
from looptap.cassettes.wire import Exchange


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def _cassette(path: Path) -> None:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "a private prompt"}]}
    resp = {
        "id": "x",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
        ],
    }
    with CassetteWriter(path) as w:
        w.append(
            Exchange(
                "POST",
                "https://api.openai.com/v1/chat/completions",
                [("content-type", "application/json")],
                orjson.dumps(body),
                200,
                "OK",
                [("content-type", "application/json")],
                [(0.1, orjson.dumps(resp))],
            )
        )


def test_exports_imports_and_cassettes_are_0600_even_with_a_permissive_umask(
    tmp_path: Path,
) -> None:
    old = os.umask(0o000)
    try:
        run = tmp_path / "run.jsonl"
        _cassette(run)
        assert _mode(run) == 0o600
        assert (
            main(
                [
                    "export",
                    "-q",
                    "--otel",
                    str(tmp_path / "o.json"),
                    "--har",
                    str(tmp_path / "h.har"),
                    str(run),
                ]
            )
            == 0
        )
        assert _mode(tmp_path / "o.json") == 0o600
        assert _mode(tmp_path / "h.har") == 0o600
        yaml = tmp_path / "c.yaml"
        yaml.write_text("interactions: []\nversion: 1\n")
        assert main(["import", "-q", "-o", str(tmp_path / "imported.jsonl"), str(yaml)]) == 0
        assert _mode(tmp_path / "imported.jsonl") == 0o600
    finally:
        os.umask(old)


def test_an_existing_world_readable_file_is_narrowed_before_it_is_written(tmp_path: Path) -> None:
    p = tmp_path / "out.har"
    p.write_text("old")
    p.chmod(0o644)
    write_private(p, b"new")
    assert _mode(p) == 0o600 and p.read_bytes() == b"new"
    log = tmp_path / "run.jsonl.log"
    log.write_text("")
    log.chmod(0o666)
    # what `looptap run --inspect` writes the child's output to
    with private_open(log, append=True) as f:
        f.write(b"x")
    assert _mode(log) == 0o600 and log.read_bytes() == b"x"
