"""A secret cut by a bound before the redactor reads it (docs/redaction.md, "Cut by a bound"): the
cut can fall inside a key, and the piece it leaves (``GITHUB_TOKEN=ghp_hE0V``) is too short for
any format rule. Each kind of cut is tried with keys of several formats, cut at every offset
within the key: no piece of 8 characters or more of the key reaches the file looptap writes.
Session 51's fresh clone found one in a cassette (a process's output past its kept 2 KiB)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from looptap.cassettes import storage
from looptap.cassettes.recording import Redactor
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import _gate
from looptap.cassettes.verify import scan_file
from looptap.cassettes.wire import Exchange
from looptap.proxy.shell_trace import STRING_FULL, Tracer, probe

#: A key of each kind, after what stands before it in text (none: a format's own literal).
KEYS = {
    "ghp": ("echo ", "ghp_hE0VQYX4ciR7tLm2Pq9sWz3Kd8Vb1Nf6Ga5J"),
    "env ghp": ("GITHUB_TOKEN=", "ghp_hE0VQYX4ciR7tLm2Pq9sWz3Kd8Vb1Nf6Ga5J"),
    "anthropic": ("key ", "sk-ant-api03-Xq7Lm2Pq9sWz3Kd8Vb1Nf6Ga5JhE0VQYX4ciR7tAbCdEfGh"),
    "aws": ("id: ", "AKIAIOSFODNN7EXAMPLQ"),
    "jwt": (
        "token ",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2IiLCJyb2xlIjoiYWRtaW4ifQ.Xq7Lm2Pq9sWz3Kd8Vb1Nf6Ga5J",
    ),
    "password": ("password=", "hunter2Xy9Qk7Lm3Pz"),
}


def _cuts() -> list[tuple[str, str, str]]:
    """``(name, key, text)``: a line, then what stands before the key and the key cut at each
    offset that leaves 8 characters or more of it."""
    return [
        (name, key, "the first line\n" + before + key[:k])
        for name, (before, key) in KEYS.items()
        for k in range(8, len(key))
    ]


def _pieces(key: str, data: bytes) -> list[str]:
    text = data.decode("utf-8", "replace")
    return [key[j : j + 8] for j in range(len(key) - 7) if key[j : j + 8] in text]


def _leaks(path: Path, cases: list[tuple[str, str, str]]) -> dict[str, list[str]]:
    data = path.read_bytes()
    return {name: p for name, key, _ in cases if (p := _pieces(key, data))}


def test_a_stream_and_an_argv_word_a_bound_cut_are_masked_at_the_cut(tmp_path: Path) -> None:
    """A process record (proxy/shell_trace.py) keeps the first 2 KiB of a stream and strace cuts
    an argv word at its string cap: the writer masks the end of each where a key begins."""
    cases = _cuts()
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for _name, _key, text in cases:
            w.append_side(
                {"type": "process", "pid": 1, "argv": ["/bin/sh", "-c", text, "x"],
                 "cut": True, "cut_words": [2], "stdout": text, "stdout_bytes": 99999,
                 "stderr": text, "stderr_bytes": 99999, "order": [[1, len(text)]]}
            )  # fmt: skip
    assert _leaks(path, cases) == {}
    lines = path.read_bytes().splitlines()[1:]
    first = orjson.loads(lines[0])
    assert first["stdout"].endswith("echo [REDACTED]") and first["order_cut"] is True
    assert first["argv"][2] == first["stdout"] and first["argv"][3] == "x"
    assert scan_file(path) == []  # (verify reads the same cut ends: nothing left to flag)


def test_texts_nothing_cut_are_kept_and_a_word_at_a_cut_is_kept(tmp_path: Path) -> None:
    """Only what the record says was cut is read so; a word at the cut stays (``pattern``,
    ``the task``, a path), as does a piece before a cut that no key's literal begins."""
    r = Redactor()
    for text in ("a pattern", "the task", "see /usr/lib/x86_64", "Akiane", "count=12", "ghp"):
        assert r.cut_end(text) == text
    path = tmp_path / "run.jsonl"
    whole = "echo ghp_short\n"
    with CassetteWriter(path) as w:
        w.append_side({"type": "process", "argv": ["echo", "ghp_ab12"], "stdout": whole,
                       "stdout_bytes": len(whole)})  # fmt: skip
    rec = orjson.loads(path.read_bytes().splitlines()[1])
    assert rec["argv"] == ["echo", "ghp_ab12"] and rec["stdout"] == whole


def test_a_body_cut_mid_way_is_masked_at_the_cut(tmp_path: Path) -> None:
    """A response reset mid-way ends where the connection broke: a key's literal before the
    cut proves it one, not only a credential's name."""
    cases = _cuts()
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for _name, _key, text in cases:
            ex = Exchange("POST", "https://api.example.com/v1/x", [], b"{}")
            ex.response_status = 200
            ex.response_headers = [("content-type", "text/plain")]
            ex.response_chunks = [(0.0, text.encode())]
            ex.transport_error = "connection reset"
            w.append(ex)
    assert _leaks(path, cases) == {}


def test_a_line_longer_than_a_piece_is_sealed_with_the_key_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``why``'s logs and ``run --inspect``'s copy a process's output a line of at most
    :data:`~cassettes.storage.LINE` bytes at a time, each sealed: a longer line's pieces are
    cut before the run of a key's characters they end in, so the key is sealed whole."""
    monkeypatch.setattr(_gate, "LINE", 256)
    r = Redactor()
    for name, (before, key) in KEYS.items():
        for k in range(1, len(key)):
            line = ("a" * (255 - len(before) - k) + " " + before + key + " and on\n").encode()
            out = io.BytesIO()
            storage.copy_sealed(io.BytesIO(line + b"next\n"), out, r.seal)
            got = out.getvalue()
            assert not _pieces(key, got), (name, k, got)
            assert got.endswith(b" and on\nnext\n") and b"[REDACTED]" in got


@pytest.mark.skipif(probe() is not None, reason=f"no process tracer here: {probe()}")
def test_strace_cuts_an_argv_word_in_a_key_and_the_record_holds_no_piece(tmp_path: Path) -> None:
    """The real tracer (``strace -s 4096`` under ``--shell-trace``): an argv word longer than its
    string cap, cut inside a key at a few offsets; the records as the writer stores them."""
    records: list[dict[str, object]] = []
    tracer = Tracer(str(tmp_path), records.append, full=True)
    _before, key = KEYS["env ghp"]
    words = [
        "x" * (STRING_FULL - 13 - k) + "GITHUB_TOKEN=" + key + " tail" for k in (8, 13, 21, 34)
    ]
    argv = tracer.argv([sys.executable, "-c", "pass", *words])
    tracer.start()
    try:
        subprocess.run(argv, check=True, timeout=120, env={**os.environ})
    finally:
        tracer.finish()
    (traced,) = [r for r in records if r.get("type") == "process" and r.get("agent")]
    assert traced["cut"] is True and traced["cut_words"] == [3, 4, 5, 6]
    assert all(key[:8] in str(w) for w in traced["argv"][3:])  # (what strace's cap left)
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for rec in records:
            w.append_side(rec)
    assert _pieces(key, path.read_bytes()) == []
    stored = orjson.loads(path.read_bytes().splitlines()[1])
    assert all(str(w).endswith("GITHUB_TOKEN=[REDACTED]") for w in stored["argv"][3:])


def test_a_replay_miss_cuts_a_long_target_without_a_key_piece() -> None:
    """A replay miss repeats the request's target up to 2,000 characters (``clip``): the cut never
    leaves a key's first characters on show, whatever scrubs the line after it."""
    from looptap.cassettes.matching._jsondiff import clip

    _before, key = KEYS["ghp"]
    for k in range(8, len(key)):
        shown = clip("/v1/" + "p" * (1996 - k) + "/" + key + "/x")
        assert not _pieces(key, shown.encode()) and shown.endswith(
            f"/[REDACTED]… [cut: {2043 - k:,} characters]"
        )


def test_verify_flags_a_key_piece_a_bound_cut_left_unmasked(tmp_path: Path) -> None:
    """``looptap verify`` reads the same cut ends: a process record written by a looptap before
    this rule (the piece as the tracer cut it) is flagged, by place and without the piece."""
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path):
        pass
    rec = {"type": "process", "pid": 7, "argv": ["sh", "-c", "export GITHUB_TOKEN=ghp_hE0VQYX4"],
           "cut": True, "cut_words": [2], "stdout": "ok\n", "stdout_bytes": 3}  # fmt: skip
    with path.open("ab") as f:
        f.write(orjson.dumps(rec) + b"\n")
    finds = scan_file(path)
    assert [(f.field, f.kind) for f in finds] == [
        ("argv[2] (cut short)", "a credential cut short by a bound")
    ]
    assert "hE0V" not in str(finds)
