"""Inputs built once a session (tests/support/shared.py, issue 105 item 2): whoever asks while the
first build runs waits for it and gets a copy; a build that failed is made again by the next
caller; without the session's directory each caller builds its own, as before."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support import shared


def _make(calls: list[str], entered: threading.Event, go: threading.Event):  # type: ignore[no-untyped-def]
    def make(d: Path) -> None:
        calls.append(str(d))
        entered.set()
        assert go.wait(600), "never released"
        d.mkdir(parents=True)
        (d / "a.jsonl").write_text("one")

    return make


def test_built_once_and_copied_to_each_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "session").mkdir()
    monkeypatch.setenv(shared.SHARED_DIR, str(tmp_path / "session"))
    calls: list[str] = []
    entered, go = threading.Event(), threading.Event()
    make = _make(calls, entered, go)
    got: dict[int, Path] = {}

    def ask(i: int) -> None:
        got[i] = shared.copy("files", make, tmp_path / f"dest{i}")

    first = threading.Thread(target=ask, args=(0,))
    first.start()
    assert entered.wait(600)
    others = [threading.Thread(target=ask, args=(i,)) for i in (1, 2)]
    for t in others:
        t.start()
    go.set()
    for t in (first, *others):
        t.join()
    assert len(calls) == 1  # the others waited for the first build
    assert sorted(got) == [0, 1, 2]
    for i, dest in got.items():
        assert dest == tmp_path / f"dest{i}" and (dest / "a.jsonl").read_text() == "one"
    (got[1] / "a.jsonl").write_text("changed by a test")  # a copy: nobody else's
    assert (shared.copy("files", make, tmp_path / "dest3") / "a.jsonl").read_text() == "one"


def test_a_failed_build_is_made_again_and_no_directory_builds_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "session").mkdir()
    monkeypatch.setenv(shared.SHARED_DIR, str(tmp_path / "session"))

    def broken(d: Path) -> None:
        d.mkdir(parents=True)
        (d / "half").write_text("")
        raise OSError("disk full")

    with pytest.raises(OSError):
        shared.copy("files", broken, tmp_path / "dest0")
    calls: list[str] = []
    go = threading.Event()
    go.set()
    dest = shared.copy("files", _make(calls, threading.Event(), go), tmp_path / "dest1")
    assert len(calls) == 1 and sorted(p.name for p in dest.iterdir()) == ["a.jsonl"]

    monkeypatch.delenv(shared.SHARED_DIR)
    dest = shared.copy("files", _make(calls, threading.Event(), go), tmp_path / "dest2")
    assert calls[-1] == str(tmp_path / "dest2") and (dest / "a.jsonl").exists()
