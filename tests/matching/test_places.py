"""Where a run was recorded (``meta.cwd``, ``meta.home`` in the cassette header): written by the
recorders, read by the replay server, so a run recorded in one checkout replays in another; a
hostile header value is bounded and ignored (cassettes.matching)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.matching import VolatileSpans, here, recorded, volatile_for
from looptap.cassettes.places import MAX_PATH, path_value
from looptap.cassettes.replay.forking.fork import branch_meta, parse_from
from looptap.cassettes.replay.serving.server import ReplayServer
from tests.replay.conftest import (
    USER,
    chat_exchange,
    chat_request,
    chat_response,
    raw_request,
    write,
)

PATH = "/v1/chat/completions"
ALICE = "/home/alice/work/proj"


def system(cwd: str) -> dict[str, str]:
    return {
        "role": "system",
        "content": "You are a coding agent. Working directory: "
        f"{cwd}. Read {cwd}/src/app.py first.",
    }


def recorded_in(tmp_path: Path, meta: dict[str, Any] | None) -> Path:
    """A one-turn run recorded in Alice's checkout, its header's ``meta`` replaced by ``meta``."""
    cas = write(
        tmp_path / "run.jsonl", [chat_exchange([system(ALICE), USER], chat_response("Done."))]
    )
    lines = cas.read_bytes().splitlines(keepends=True)
    header = orjson.loads(lines[0])
    if meta is None:
        header["meta"].pop("cwd", None)
        header["meta"].pop("home", None)
    else:
        header["meta"] = meta
    cas.write_bytes(orjson.dumps(header) + b"\n" + b"".join(lines[1:]))
    return cas


def test_a_run_recorded_in_another_checkout_replays_here_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorded request names Alice's checkout, this one names the checkout the replay runs in:
    both are ``<cwd>``, served, and the note says what was tolerated."""
    mine = tmp_path / "checkout" / "proj"
    mine.mkdir(parents=True)
    monkeypatch.chdir(mine)
    cas = recorded_in(tmp_path, {"source": "looptap proxy", "cwd": ALICE, "home": "/home/alice"})
    with ReplayServer(cas) as srv:
        status, _, _ = raw_request(srv.url, "POST", PATH, chat_request([system(str(mine)), USER]))
        notes = srv.served[0].notes
    assert status == 200
    assert (
        notes
        == [f"tolerated: cwd at messages[0].content: recorded '{ALICE}', this request '{mine}'"] * 2
    )


@pytest.mark.parametrize(
    "meta",
    [
        pytest.param(None, id="older-cassette-without-the-fields"),
        pytest.param({"cwd": "/" + "a" * (MAX_PATH + 10)}, id="huge"),
        pytest.param({"cwd": "/home/alice/work/proj\n\x1b[31m"}, id="control-characters"),
        pytest.param({"cwd": "/home/alice/work/\u202eproj"}, id="bidi-override"),
        pytest.param({"cwd": ["/home/alice/work/proj"], "home": {"x": 1}}, id="not-strings"),
        pytest.param({"cwd": 42, "home": None}, id="numbers"),
        pytest.param({"cwd": "home/alice/work/proj"}, id="relative"),
        pytest.param("not a table", id="meta-not-a-table"),
    ],
)
def test_without_a_usable_recorded_cwd_the_replay_loads_and_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, meta: Any
) -> None:
    """No field (an older cassette) or a hostile one: the file loads, the recorded cwd is not
    tolerated (a miss, as before the fields existed), and nothing raises."""
    mine = tmp_path / "checkout" / "proj"
    mine.mkdir(parents=True)
    monkeypatch.chdir(mine)
    cas = recorded_in(tmp_path, meta)
    with ReplayServer(cas) as srv:
        status, _, _ = raw_request(srv.url, "POST", PATH, chat_request([system(str(mine)), USER]))
        assert status != 200 and len(srv.misses) == 1
        # the recorded request itself is still served (nothing else changed)
        assert raw_request(srv.url, "POST", PATH, chat_request([system(ALICE), USER]))[0] == 200


def test_hostile_values_are_bounded_and_ignored() -> None:
    for bad in (
        "/" + "a" * MAX_PATH,
        "/x\x00y/z",
        "/x/\ny",
        "/x/\u2028y",
        7,
        1.5,
        True,
        None,
        [],
        {},
        "",
        "/",
        "rel/x",
    ):
        assert path_value(bad) is None, repr(bad)[:40]
        assert recorded({"meta": {"cwd": bad, "home": bad}}) == ([], [])
    for header in (None, 3, "x", [], {"meta": None}, {"meta": []}, {}):
        assert recorded(header) == ([], [])
    assert recorded({"meta": {"cwd": ALICE, "home": "/home/alice"}}) == ([ALICE], ["/home/alice"])
    v = volatile_for({"meta": {"cwd": ALICE, "home": "/home/alice"}})
    assert ALICE in v.cwds and "/home/alice" in v.homes


def test_here_is_this_process_paths_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/alice")
    assert here() == {"cwd": str(tmp_path), "home": "/home/alice"}
    monkeypatch.setenv("HOME", "/home/alice\nevil")
    assert here() == {"cwd": str(tmp_path)}


def test_a_branch_header_carries_the_forks_own_places(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cas = write(
        tmp_path / "run.jsonl", [chat_exchange([system(ALICE), USER], chat_response("Done."))]
    )
    where = tmp_path / "b"
    where.mkdir()
    monkeypatch.chdir(where)
    monkeypatch.setenv("HOME", "/home/bob")
    meta = branch_meta(parse_from(f"{cas}@turn=0"), None)
    assert (meta["cwd"], meta["home"]) == (str(where), "/home/bob")


def test_the_plugins_and_the_proxys_writers_put_them_in_the_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorder's writer process (proxy.writer) writes this process's places, less a path the
    redactor would mask (a key in a folder's name never reaches the header)."""
    from looptap.cassettes.recording import Redactor
    from looptap.proxy.writer import header_places

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/alice")
    assert header_places(Redactor.configured()) == {"cwd": str(tmp_path), "home": "/home/alice"}
    keyed = tmp_path / "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd"
    keyed.mkdir()
    monkeypatch.chdir(keyed)
    assert header_places(Redactor.configured()) == {"home": "/home/alice"}
    # (the header the real recorder writes: tests/proxy/test_e2e_fork_elsewhere.py)


def test_a_cwd_that_ends_a_sentence_is_the_cwd() -> None:
    """``Working directory: /home/alice/work/proj.``: the full stop ends the sentence, not the path
    (``proj.git`` and ``proj.d/`` are other directories)."""
    v = volatile_for({"meta": {"cwd": ALICE}})
    assert (
        v.normalise(f"Working directory: {ALICE}. Read {ALICE}/a.py.")[0]
        == "Working directory: <cwd>. Read <cwd>/a.py."
    )
    assert (
        v.normalise(f"Clone {ALICE}.git and {ALICE}.d/x, {ALICE}-old")[0]
        == f"Clone {ALICE}.git and {ALICE}.d/x, {ALICE}-old"
    )


def test_the_cwd_as_a_folder_name_is_the_cwd() -> None:
    """Claude Code's memory folder is named after the cwd
    (``~/.claude/projects/-home-alice-work-proj/``): another checkout's is the same ``<cwd>``; a
    longer name is another folder."""
    mine = VolatileSpans(
        cwd="/srv/bob/co_2", home="/srv/bob", recorded_cwd=[ALICE], recorded_home=["/home/alice"]
    )
    recorded = "memory at `/home/alice/.claude/projects/-home-alice-work-proj/memory/`."
    live = "memory at `/srv/bob/.claude/projects/-srv-bob-co-2/memory/`."
    assert (
        mine.normalise(recorded)[0]
        == mine.normalise(live)[0]
        == "memory at `<home>/.claude/projects/<cwd>/memory/`."
    )
    assert mine.normalise("see -home-alice-work-proj-old/ and x-home-alice-work-proj")[1] == ()


def test_without_a_cwd_or_home_the_detectors_still_run() -> None:
    """A process whose cwd is a temp directory (pytest's ``tmp_path``) and whose home is ``/root``
    knows no place: the other detectors work as ever (a ``-`` starts no span)."""
    v = VolatileSpans(cwd="/tmp/tmpabcdefgh", home="/root")
    assert (v.cwds, v.homes) == ([], [])
    assert v.normalise("a -b 2026-11-25 in /tmp/tmpabcdefgh/x -c")[0] == "a -b <date> in <tmp>/x -c"
