"""A file that grew is continued from where its kept analysis ends (issue 48, docs/kept-analysis.md
"A file that grew"): only the new records are analysed, and every output is byte for byte a fresh
analysis' of the whole file; a changed prefix, a changed or cut kept file, another analyser or a
file that shrank each lead to a fresh analysis from the first byte, whose findings are shown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from cassettes.analysis import spill
from cassettes.errors import CassetteError
from cassettes.reading import kept
from cassettes.reading.run import open_run
from cassettes.recording.pipeline import CassetteWriter
from cassettes.wire.exchange import Exchange
from tests.support.analysed import Analysed, cli_output, keep_every_run

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"
URL = "https://api.openai.com/v1/chat/completions"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every run kept (however small), in a cache of the test's own."""
    return keep_every_run(tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The lines of a cassette of real recorded traffic (header first): every 8th file of the
    corpus imported into one run (many API families, streams, tool calls, errors; findings in every
    layer; 3.4 MB)."""
    path = tmp_path_factory.mktemp("recorded") / "run.jsonl"
    files = sorted(p for p in CORPUS.rglob("*.yaml") if not p.name.endswith(".xai.yaml"))[::8]
    with CassetteWriter(path, meta={"source": "vcr"}) as w:
        for f in files:
            try:
                run = open_run(f, formats=("vcr",))
            except CassetteError:
                continue
            for ex in run.exchanges:
                w.append(ex)
    return path.read_bytes().splitlines(keepends=True)


def _exchange(i: int, status: int = 200) -> Exchange:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"question {i}"}]}
    answer = {"id": f"c{i}", "object": "chat.completion", "model": "gpt-4o-2024-08-06",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": f"answer {i}"}, "finish_reason": "stop"}],  # noqa: E501
              "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}  # fmt: skip
    return Exchange("POST", URL, [("content-type", "application/json")], orjson.dumps(body), status=status,  # noqa: E501
                    response_headers=[("content-type", "application/json")], response_chunks=[(0.01, orjson.dumps(answer))], ttfb=0.01)  # fmt: skip  # noqa: E501


def _agents(path: Path, agents: int = 6, turns: int = 30, pad: int = 5000) -> list[bytes]:
    """The lines of a cassette (header first) of ``agents`` conversations going on side by side,
    each request carrying its conversation's whole history so far (threaded by its content: a
    continued analysis threads the new turns by the keys it kept of the old ones)."""
    histories: list[list[dict[str, Any]]] = [[] for _ in range(agents)]
    with CassetteWriter(path) as w:
        for t in range(turns):
            for a in range(agents):
                history = histories[a]
                history.append(
                    {"role": "user", "content": f"agent {a} step {t}: " + f"data {a}.{t} " * pad}
                )
                body = {"model": "gpt-4o", "messages": history}
                answer = {"id": f"c{a}-{t}", "object": "chat.completion", "model": "gpt-4o-2024-08-06",  # noqa: E501
                          "choices": [{"index": 0, "message": {"role": "assistant", "content": f"done {a}.{t}"}, "finish_reason": "stop"}],  # noqa: E501
                          "usage": {"prompt_tokens": 50 * t + 5, "completion_tokens": 3, "total_tokens": 50 * t + 8}}  # fmt: skip  # noqa: E501
                w.append(Exchange("POST", URL, [("content-type", "application/json")], orjson.dumps(body), status=200,  # noqa: E501
                                  response_headers=[("content-type", "application/json")], response_chunks=[(0.01, orjson.dumps(answer))], ttfb=0.01))  # fmt: skip  # noqa: E501
                history.append({"role": "assistant", "content": f"done {a}.{t}"})
    return path.read_bytes().splitlines(keepends=True)


def _small(path: Path, statuses: list[int]) -> list[bytes]:
    """A small cassette's lines (header first), one round trip per status."""
    with CassetteWriter(path) as w:
        for i, status in enumerate(statuses):
            w.append(_exchange(i, status))
    return path.read_bytes().splitlines(keepends=True)


def _outputs(path: Path, other: Path | None = None) -> list[tuple[int, bytes, str]]:
    """What every command that reads a run prints of it: ``show`` (text and JSON), ``textconv``,
    an OTLP export and (with ``other``) a diff against another run."""
    p = str(path)
    out = [cli_output("show", "--json", p), cli_output("show", p), cli_output("textconv", p)]
    out.append(cli_output("export", "--otel", "-", p))
    if other is not None:
        out.append(cli_output("diff", p, str(other)))
    return out


def _fresh(path: Path, monkeypatch: pytest.MonkeyPatch, other: Path | None = None) -> Any:
    with monkeypatch.context() as m:
        m.setenv("LOOPTAP_NO_CACHE", "1")
        return _outputs(path, other)


def _findings(path: Path) -> list[tuple[str, int | None]]:
    run = open_run(path)
    try:
        return [(f.code, f.seq) for f in run.analysis.findings]
    finally:
        run.close()


def _meta(path: Path) -> dict[str, Any]:
    """The meta section of the analysis kept of the cassette at ``path``."""
    where = kept.location(path)
    assert where is not None
    data = where.read_bytes()
    at = len(kept.MAGIC)
    n = int.from_bytes(data[at : at + 8], "big")
    got: dict[str, Any] = orjson.loads(data[at + 8 : at + 8 + n])
    return got


@pytest.mark.parametrize(
    ("cut", "keep"),
    [(40, None), (130, None), (228, None), (100, 4)],
    ids=["early", "middle", "all-but-one", "spilled tables"],
)
def test_a_grown_file_is_continued_and_prints_as_a_fresh_analysis(
    cut: int,
    keep: int | None,
    recorded: list[bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    _cache: Path,
) -> None:
    if keep is not None:  # the analysis' tables spill to disk past this many entries
        monkeypatch.setattr(spill, "KEEP", keep)
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"".join(recorded[: len(recorded) // 2]))
    cli_output("show", str(other))  # (its analysis kept: the diff below takes it)
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(recorded[:cut]))  # the header and cut - 1 round trips
    cli_output("show", "--json", str(path))  # analysed, kept
    assert _meta(path)["resume"] == path.stat().st_size
    with path.open("ab") as f:  # the recording goes on
        f.write(b"".join(recorded[cut:]))
    counted = Analysed(monkeypatch)
    grown = _outputs(path, other)
    assert counted.added == len(recorded) - cut  # only the new round trips were analysed
    fresh = _fresh(path, monkeypatch, other)
    assert grown == fresh
    assert all(f"{layer}." in fresh[1][1].decode() for layer in "EAC")  # (findings in every layer)
    # the grown file's analysis is kept in its place: the next reader takes it
    counted = Analysed(monkeypatch)
    assert _outputs(path) == fresh[:4]
    assert counted.added == 0
    assert _meta(path)["size"] == path.stat().st_size


def test_a_file_that_grew_twice_is_continued_twice(
    recorded: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"
    at = 0
    for cut in (60, 150, len(recorded)):
        with path.open("ab") as f:
            f.write(b"".join(recorded[at:cut]))
        counted = Analysed(monkeypatch)
        grown = _outputs(path)
        assert counted.added == (cut - at if at else cut - 1)  # the new round trips only
        assert grown == _fresh(path, monkeypatch)
        at = cut


def test_a_torn_last_record_completed_later_is_read_whole(
    recorded: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The analysis kept of a file whose last record was being written (reported torn) is
    continued from before that record once it is complete."""
    path = tmp_path / "run.jsonl"
    head = b"".join(recorded[:100])
    path.write_bytes(head + recorded[100][: len(recorded[100]) // 2])
    torn = cli_output("show", str(path))
    assert b"torn last record" in torn[1] + torn[2].encode()
    with path.open("ab") as f:
        f.write(recorded[100][len(recorded[100]) // 2 :] + b"".join(recorded[101:]))
    counted = Analysed(monkeypatch)
    grown = _outputs(path)
    assert counted.added == len(recorded) - 100
    assert grown == _fresh(path, monkeypatch)
    assert b"torn last record" not in grown[1][1] + grown[1][2].encode()


_CHILD = """
import sys
from cassettes.analysis.run import RunAnalyser
from cassettes.cli import main
real, n = RunAnalyser.add, [0]
def add(self, *a, **k):
    n[0] += 1
    return real(self, *a, **k)
RunAnalyser.add = add
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(n[0], file=sys.stderr)
"""


def _child(seed: int, tmp_path: Path, *argv: str) -> tuple[bytes, int]:
    """``looptap ARGV`` in a process of its own with this hash seed: its stdout and the round
    trips it analysed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHONHASHSEED"))}
    env.update(PYTHONHASHSEED=str(seed), PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        check=True,
    )
    return proc.stdout, int(proc.stderr.decode().strip().splitlines()[-1])


@pytest.mark.parametrize("run", ["agents", "recorded"])
def test_another_process_continues_what_one_kept(
    run: str, recorded: list[bytes], tmp_path: Path, _cache: Path
) -> None:
    """The process that continues is not the one that kept (``hash`` of a str is salted per
    process: what the threader and the checks keep must not depend on it): conversations that
    go on across the cut are threaded as a fresh analysis threads them."""
    lines = _agents(tmp_path / "agents.jsonl") if run == "agents" else recorded
    cut = len(lines) // 2 if run == "agents" else 120
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(lines[:cut]))
    assert path.stat().st_size >= 1 << 20  # (kept by a process of its own: kept.MIN_BYTES)
    _, analysed = _child(1, tmp_path, "show", "--json", str(path))
    assert analysed == cut - 1
    with path.open("ab") as f:
        f.write(b"".join(lines[cut:]))
    for argv in (["show", "--json"], ["show"]):
        continued, analysed = _child(2, tmp_path, *argv, str(path))
        fresh, _ = _child(3, tmp_path, *argv, "--no-cache", str(path))
        assert continued == fresh
        assert analysed == (len(lines) - cut if argv == ["show", "--json"] else 0)
    if run == "agents":
        assert b"180 round trips" in fresh and b"6 conversations" in fresh


@pytest.mark.parametrize("longer", [False, True], ids=["same size", "grown"])
def test_a_changed_prefix_is_analysed_again_and_its_finding_shown(
    longer: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"
    lines = _small(path, [200, 200, 200, 200])
    assert not [c for c, _ in _findings(path) if c == "A.http_error"]
    assert lines[2].count(b'"status":200') == 1
    lines[2] = lines[2].replace(b'"status":200', b'"status":500')  # inside the bytes analysed
    if longer:
        lines.append(b"".join(_small(tmp_path / "more.jsonl", [200] * 5)[5:]))
    path.write_bytes(b"".join(lines))
    counted = Analysed(monkeypatch)
    tampered = _outputs(path)
    assert counted.added == (5 if longer else 4)  # from the first byte
    assert b"A.http_error" in tampered[1][1]
    assert tampered == _fresh(path, monkeypatch)


@pytest.mark.parametrize("how", ["its working state changed", "cut short", "cut in the MAC"])
def test_a_changed_kept_file_is_not_continued(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _cache: Path
) -> None:
    path = tmp_path / "run.jsonl"
    _small(path, [200, 500, 200])
    _findings(path)
    (where,) = _cache.glob("*.kept")
    data = where.read_bytes()
    if how == "its working state changed":
        at = data.rindex(b"A.http_error")  # (the last copy: the working state's)
        data = data[:at] + b"A.http_errox" + data[at + 12 :]
    else:
        data = data[: len(data) // 2 if how == "cut short" else -1]
    where.write_bytes(data)
    with path.open("ab") as f:
        f.write(_small(tmp_path / "more.jsonl", [200] * 4)[4])
    counted = Analysed(monkeypatch)
    again = _outputs(path)
    assert counted.added == 4
    assert again == _fresh(path, monkeypatch)
    assert b"A.http_error" in again[1][1]


def test_another_analyser_analyses_a_grown_file_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"
    _small(path, [200, 500, 200])
    _findings(path)
    with path.open("ab") as f:
        f.write(_small(tmp_path / "more.jsonl", [200] * 4)[4])
    digest = kept.analyser_digest()
    assert digest is not None
    changed = bytes(b ^ 0xFF for b in digest)
    monkeypatch.setattr(kept, "analyser_digest", lambda: changed)  # a changed source
    counted = Analysed(monkeypatch)
    assert ("A.http_error", 1) in _findings(path)
    assert counted.added == 4


def test_a_file_that_shrank_is_analysed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"
    lines = _small(path, [200, 200, 500, 200])
    assert ("A.http_error", 2) in _findings(path)
    path.write_bytes(b"".join(lines[:3]))  # two round trips left
    counted = Analysed(monkeypatch)
    shrunk = _outputs(path)
    assert counted.added == 2
    assert shrunk == _fresh(path, monkeypatch)
    assert not [c for c, _ in _findings(path) if c == "A.http_error"]


def _followed(path: Path, cache: bool) -> dict[int, list[str]]:
    """The findings of each turn's summary, as a viewer following the run (the inspector) has
    them once it is finished."""
    run = open_run(path, follow=True, cache=cache)
    try:
        while not run.step().at_end:
            pass
        run.finish()
        return {seq: [f.code for f in s.findings] for seq, s in run.summaries.items()}
    finally:
        run.close()


def test_a_viewer_following_a_grown_file_has_every_turn_and_finding(
    recorded: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inspector of a grown file: the turns read before are summarised from the kept analysis,
    the new ones as they are read, and the end-of-run checks' findings show in both."""
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(recorded[:150]))
    cli_output("show", str(path))
    with path.open("ab") as f:
        f.write(b"".join(recorded[150:]))
    counted = Analysed(monkeypatch)
    continued = _followed(path, True)
    assert counted.added == len(recorded) - 150
    fresh = _followed(path, False)
    assert continued == fresh
    assert sum(map(len, fresh.values())) > 50
