"""A fork's agent whose ``HOME`` lies in the recorded working tree keeps it (proxy/isolation.py):
the scratch copy of the tree is mounted over the recorded path, so that ``HOME`` is already the
copy's, and its path is the one the recording's requests carry (Claude Code's system prompt names
``~/.claude/projects/…``). Given an empty scratch folder elsewhere instead, every request naming
it differed from the recording, and bench/why_cases.py's Claude Code case was not determined (its
branches refused as "the client diverged before the cursor", the system prompt changed). A
``HOME`` outside the tree and not layered still gets the empty scratch folder."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from looptap.proxy import isolation


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    tree, scratch, elsewhere = tmp_path / "tree", tmp_path / "scratch", tmp_path / "elsewhere"
    for p in (tree / "home", scratch, elsewhere / "home", elsewhere / "tmp"):
        p.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(elsewhere / "tmp"))
    return {"tree": tree, "scratch": scratch, "elsewhere": elsewhere}


def test_a_home_in_the_tree_is_left_as_it_is(
    places: dict[str, Path], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    home = places["tree"] / "home"
    monkeypatch.setenv("HOME", str(home))
    with caplog.at_level(logging.INFO):
        env = isolation._scratch_env(places["scratch"], {}, str(places["tree"]))
    assert "HOME" not in env, env
    assert env["TMPDIR"] == str(places["scratch"] / "tmp")  # not in the tree: a scratch folder
    said = caplog.text
    assert f"its HOME {home.resolve()} in the scratch copy of the tree it lies in" in said, said


def test_a_home_outside_the_tree_not_layered_is_an_empty_scratch_folder(
    places: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(places["elsewhere"] / "home"))
    env = isolation._scratch_env(places["scratch"], {}, str(places["tree"]))
    assert env["HOME"] == str(places["scratch"] / "home")
    assert (places["scratch"] / "home").is_dir()
