"""One way to open a run (issue 15 item 3): ``open_run`` tells the format from the first bytes,
whatever the file is called, and every command reads what the others read — a flow file, a vcrpy
cassette under an odd name; a HAR file and garbage get one line naming what was tried."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson
import pytest

from looptap import cassettes
from looptap.cassettes.cli import main
from looptap.cassettes.errors import CassetteFormatError
from looptap.cassettes.reading import Run, cassette_of, open_run, sniff
from looptap.cassettes.replay.serving.server import ReplayServer
from looptap.cassettes.storage import load_flows, read_records
from tests.interop.cassette_files import CACHE_WRITE, FIXTURES, REASONING, REPO, write_cassette
from tests.support import progress
from tests.support.analysed import cli_run

FLOWS = FIXTURES / "flows_mitmproxy11.mitm"
GARBAGE = [b"not json at all\n", bytes(range(256)) * 10, b"# only a comment\n", b"[1, 2, 3]\n"]


def looptap(*args: str) -> subprocess.CompletedProcess[str]:
    return progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
    )


def one_line_error(r: subprocess.CompletedProcess[str], *words: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("looptap: error:") and all(w in r.stderr for w in words), r.stderr


@pytest.fixture
def odd_yaml(tmp_path: Path) -> Path:
    """A vcrpy cassette whose name says nothing of YAML."""
    dest = tmp_path / "cassette.yaml.txt"
    shutil.copy(CACHE_WRITE, dest)
    return dest


# -- the format, from the first bytes -----------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (FLOWS.read_bytes()[:4096], "mitmproxy"),
        (b"interactions:\n- request:\n", "vcr"),
        (b"version: 1\ninteractions:\n- request_sample:\n", "vcr"),
        (b"# recorded by vcrpy\n\n---\ninteractions: []\n", "vcr"),
        (b'{\n    "interactions": [],\n    "version": 1\n}', "vcr"),  # vcrpy's JSON serializer
        (b'{"type":"header","format":"looptap-cassette","format_version":1}\n', "looptap"),
        (b'\xef\xbb\xbf{"type":"header"}\n', "looptap"),
        (b'{"type":"exchange","seq":0}\n', "looptap"),  # not a header: the cassette reader says so
        (b"", "empty"),
        (b"\n \r\n", "empty"),
        (b'{\n  "log": {\n    "version": "1.2"', "har"),
        *((g, "unknown") for g in GARBAGE),
    ],
)
def test_the_format_is_told_from_the_first_bytes(head: bytes, kind: str) -> None:
    assert sniff(head) == kind


def test_every_format_opens_into_the_one_run(tmp_path: Path, odd_yaml: Path) -> None:
    cassette = write_cassette(CACHE_WRITE, tmp_path / "run.jsonl")
    import yaml

    as_json = tmp_path / "vcr.json"  # vcrpy's JSON serializer
    as_json.write_bytes(orjson.dumps(yaml.safe_load(REASONING.read_bytes())))
    runs = {
        "looptap": open_run(cassette),
        "vcr": open_run(odd_yaml),
        "json": open_run(as_json),
        "mitmproxy": open_run(FLOWS),
    }
    assert {k: r.kind for k, r in runs.items()} == {
        "looptap": "looptap",
        "vcr": "vcr",
        "json": "vcr",
        "mitmproxy": "mitmproxy",
    }
    assert all(isinstance(r, Run) for r in runs.values()) and cassettes.Run is Run
    for key in ("looptap", "vcr"):  # the same recording, two containers
        assert runs[key].families == {"bedrock": 2} and len(runs[key].turns) == 2
        assert runs[key].total_tokens == runs["looptap"].total_tokens > 0
    assert len(runs["json"]) == len(open_run(REASONING)) > 0
    assert runs["json"].total_tokens == open_run(REASONING).total_tokens > 0
    assert runs["mitmproxy"].families == {"openai_chat": 2, "anthropic": 1, "none": 1}
    whole = open_run(cassette, whole=True)
    assert (
        isinstance(whole.exchanges, list)
        and whole.analysis.findings == runs["looptap"].analysis.findings
    )
    assert len(Run.from_cassette(FLOWS)) == 4  # the pytest plugin's helper reads any format too


def test_open_run_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    har = tmp_path / "run.har"
    har.write_text('{"log": {"version": "1.2", "entries": []}}')
    with pytest.raises(CassetteFormatError, match="a HAR file: looptap writes HAR"):
        open_run(har)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"hello\n")
    with pytest.raises(
        CassetteFormatError,
        match="not a looptap cassette, a vcrpy cassette or a mitmproxy flow file",
    ):
        open_run(bad)
    with pytest.raises(
        CassetteFormatError, match=r"a mitmproxy flow file .*; this command reads a vcrpy cassette"
    ):
        open_run(FLOWS, formats=("vcr",))
    empty = tmp_path / "empty.yaml"
    empty.write_bytes(b"\n")
    for formats in (("looptap", "vcr", "mitmproxy"), ("vcr", "mitmproxy")):
        with pytest.raises(CassetteFormatError, match="empty file, nothing to read"):
            open_run(empty, formats=formats)


# -- the commands ---------------------------------------------------------------------------------


def test_show_reads_a_flow_file_and_an_oddly_named_yaml(odd_yaml: Path) -> None:
    r = looptap("show", str(FLOWS))
    assert r.returncode == 0, r.stderr
    assert "4 round trips, 3 to LLM APIs (anthropic 1, openai_chat 2)" in r.stdout
    r = looptap("show", "--json", str(FLOWS))
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 4
    r = looptap("show", str(odd_yaml))
    assert r.returncode == 0, r.stderr
    assert "2 round trips, 2 to LLM APIs (bedrock 2)" in r.stdout


def test_export_reads_an_oddly_named_yaml(odd_yaml: Path, tmp_path: Path) -> None:
    har = tmp_path / "out.har"
    r = looptap("export", str(odd_yaml), "--har", str(har))
    assert r.returncode == 0, r.stderr
    assert len(orjson.loads(har.read_bytes())["log"]["entries"]) == 2
    # The HAR it wrote is recognised and refused by name, not taken for a broken cassette.
    one_line_error(looptap("show", str(har)), "a HAR file", "does not read it")


def test_replay_serves_a_flow_file(tmp_path: Path) -> None:
    first = load_flows(FLOWS).exchanges[0]
    path = "/" + first.url.split("/", 3)[3]
    with ReplayServer(FLOWS) as server:
        req = urllib.request.Request(
            server.url + path,
            data=first.request_body,
            method="POST",
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status == 200 and resp.read() == first.response_body
        assert len(server.matcher.recorded) == 4 and not server.misses
    proc = subprocess.Popen(
        [sys.executable, "-m", "looptap.cassettes.cli", "replay", str(FLOWS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("export "), line
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = progress.communicate(proc)
    assert f"replaying {FLOWS}: 4 round trips" in err and "Traceback" not in err


def test_diff_and_textconv_read_an_oddly_named_yaml(odd_yaml: Path, tmp_path: Path) -> None:
    cassette = write_cassette(CACHE_WRITE, tmp_path / "run.jsonl")
    r = looptap("diff", str(odd_yaml), str(cassette))
    assert r.returncode == 0, r.stdout + r.stderr
    r = looptap("textconv", str(odd_yaml))
    assert r.returncode == 0 and "imported run: 2 round trips" in r.stdout, r.stdout + r.stderr


def test_import_takes_an_odd_name_and_refuses_a_cassette(odd_yaml: Path, tmp_path: Path) -> None:
    out = tmp_path / "imported.jsonl"
    r = looptap("import", str(odd_yaml), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert read_records(out).header["meta"]["source"] == "vcr"
    one_line_error(
        looptap("import", str(out), "-o", str(tmp_path / "again.jsonl")),
        "a looptap cassette",
        "this command reads a vcrpy cassette",
    )


@pytest.mark.parametrize("garbage", GARBAGE, ids=["text", "binary", "comment", "array"])
def test_garbage_gets_one_line_naming_what_was_tried(
    garbage: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each command as a process for the first garbage (the command line's own wiring: what the
    interpreter would print), the same commands in this process (``main``, as the command runs
    them) for the others: seven processes a case were a second each."""
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(garbage)
    tried = ("not a looptap cassette", "a vcrpy cassette", "a mitmproxy flow file")

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        if garbage == GARBAGE[0]:
            return looptap(*args)
        capsys.readouterr()
        rc = main(list(args))
        said = capsys.readouterr()
        return subprocess.CompletedProcess(args, rc, said.out, said.err)

    for args in (
        ["show"],
        ["show", "--json"],
        ["export", "--har", str(tmp_path / "x.har")],
        ["diff", str(bad)],
        ["replay"],
    ):
        one_line_error(command(*args, str(bad)), *tried)
    one_line_error(command("import", str(bad), "-o", str(tmp_path / "x.jsonl")), *tried)
    r = command("textconv", str(bad))  # git's diff driver shows a file that is not a run as it is
    assert r.returncode == 0 and "Traceback" not in r.stderr


def test_the_inspector_gets_a_cassette_of_any_format(odd_yaml: Path, tmp_path: Path) -> None:
    for src, source in ((FLOWS, "mitmproxy"), (odd_yaml, "vcr")):
        with cassette_of(src) as path:
            assert path != src and path.suffix == ".jsonl"
            cas = read_records(path)
            assert cas.header["meta"] == {"source": source, "imported_from": src.name}
            assert len(cas.exchanges) == len(open_run(src).exchanges)
        assert not path.exists() and not path.parent.exists()
    cassette = write_cassette(CACHE_WRITE, tmp_path / "run.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"junk\n")
    # read (or refused) by the inspector itself
    for same in (cassette, bad, tmp_path / "not-yet.jsonl"):
        with cassette_of(same) as path:
            assert path == same
    with cassette_of(odd_yaml, live=True) as path:  # --live follows a recording being written
        assert path == odd_yaml


def test_keys_in_other_tools_files_never_reach_an_output(tmp_path: Path) -> None:
    """A flow dump or a vcrpy cassette holds what crossed the wire, keys included (the fixture
    flows carry ``Bearer sk-looptap-flow-SENTINEL``): every command that reads one redacts it as
    it reads, so neither a HAR or OTLP file nor the terminal gets the key."""
    assert b"sk-looptap-flow-SENTINEL" in FLOWS.read_bytes()
    text = CACHE_WRITE.read_text()
    key = "sk-ant-api03-" + "SENTINELvcrKEY" * 4
    i = text.index("headers:")
    leaky = tmp_path / "leaky.yaml"
    leaky.write_text(
        text[:i] + f"headers:\n      x-api-key:\n      - {key}\n" + text[i + len("headers:\n") :]
    )
    assert key in leaky.read_text()
    for src, secret in ((FLOWS, "sk-looptap-flow-SENTINEL"), (leaky, key)):
        har, otel = tmp_path / f"{src.stem}.har", tmp_path / f"{src.stem}.otel.json"
        r = looptap("export", str(src), "--har", str(har), "--otel", str(otel), "-q")
        assert r.returncode == 0, r.stderr
        outputs = [har.read_text(), otel.read_text(), r.stdout, r.stderr]
        for args in (("show", str(src)), ("show", "--json", str(src)), ("textconv", str(src))):
            r = cli_run(*args)  # (in this process: the export above is the process path)
            assert r.returncode in (0, 1), r.stderr
            outputs += [r.stdout, r.stderr]
        assert not [o[:200] for o in outputs if secret in o]
        assert "[REDACTED]" in outputs[0]  # the header is there, its value masked
