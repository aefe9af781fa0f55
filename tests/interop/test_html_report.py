"""``looptap export --html``: the page's data (root cause first, histories stored once and
rebuilt exactly), the JSON escaping and Content-Security-Policy of the page, the command's
output-path rules and the ``web_report`` answer of ``looptap mcp``. The page in a real browser:
test_html_browser.py."""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.reading import open_run
from looptap.cassettes.views.report import report_data
from tests.interop.html_runs import PAYLOADS, hostile_run
from tests.support.analysed import cli_run

jinja2 = pytest.importorskip("jinja2")

from looptap.cassettes.views.htmlpage import embed_json, render_html  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def page_data(page: str) -> dict[str, Any]:
    """The data a page embeds, read back as the page's script reads it."""
    m = re.search(r'<script type="application/json" id="looptap-data">(.*?)</script>', page, re.S)
    assert m, "no data element"
    value = orjson.loads(m.group(1))
    if "gzip" in value:
        value = orjson.loads(gzip.decompress(base64.b64decode(value["gzip"])))
    assert isinstance(value, dict)
    return value


def histories(data: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """Every turn's messages rebuilt from the deltas, as page.js does."""
    ids: dict[int, list[int]] = {}
    for row in data["turns"]:
        base, keep, own = data["detail"][str(row["seq"])]["history"]
        ids[row["seq"]] = (ids[base][:keep] if keep else []) + own
    return {s: [data["messages"][i] for i in v] for s, v in ids.items()}


def test_embedded_json_cannot_end_its_element_and_reads_back_the_same() -> None:
    value = {"t": " ".join(PAYLOADS) + " <!-- ]]> & \u2028 \u2029", "k": ["</SCRIPT >", "<\u2028"]}
    out = embed_json(value)
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in out
    assert orjson.loads(out) == value


def test_csp_allows_only_the_pages_own_script_and_style_by_hash(demo_cassette: Path) -> None:
    page = render_html(report_data(open_run(demo_cassette)))
    csp = html.unescape(
        re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    )  # type: ignore[union-attr]
    assert csp.startswith("default-src 'none'")
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    styles = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert len(scripts) == 1 and len(styles) == 1
    for body, directive in ((scripts[0], "script-src"), (styles[0], "style-src")):
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"{directive} 'sha256-{digest}'" in csp
    assert not re.search(r"\b(?:src|href)=", page), "the page refers to nothing outside itself"


def test_demo_findings_root_cause_first_with_caused_by(demo_cassette: Path) -> None:
    data = report_data(open_run(demo_cassette))
    codes = [(f["code"], f.get("caused_by")) for f in data["findings"]]
    assert codes[0] == ("E.arguments_schema", None)
    assert codes[1] == ("C.tool_result_error", "E.arguments_schema")
    assert data["findings"][1]["caused_by_seq"] == data["findings"][0]["seq"]
    assert data["totals"]["turns"] == 11 and data["totals"]["conversations"] == 4
    worst = {r["seq"]: r["badges"]["E"] for r in data["turns"]}
    assert worst[data["findings"][0]["seq"]] == ["warning", 1]


@pytest.mark.parametrize("compress", [False, True])
def test_histories_stored_once_rebuild_every_request(tmp_path: Path, compress: bool) -> None:
    """Each turn's messages, rebuilt from the deltas, are its request's messages, in order."""
    from tests.interop.html_runs import conversation_turns, write

    path = write(tmp_path / "run.jsonl", conversation_turns(0, 12) + conversation_turns(1, 5))
    run = open_run(path, whole=True)
    data = page_data(render_html(report_data(run), compress=compress))
    rebuilt = histories(data)
    for rt in run.roundtrips:
        assert rt.request is not None and rt.seq is not None
        got = rebuilt[rt.seq]
        assert [m["role"] for m in got] == [m.role for m in rt.request.messages]
        assert [p.get("t") for m in got for p in m["parts"]] == [
            p.text for m in rt.request.messages for p in m.parts
        ]
    # Stored once: a 12-turn loop's 2 + 2×11 distinct messages, not the 12 × 13 it re-sends.
    assert len(data["messages"]) <= 2 + 2 * 11 + 2 + 2 * 4


def test_recorded_text_is_data_only(tmp_path: Path) -> None:
    page = render_html(
        report_data(open_run(hostile_run(tmp_path / "hostile.jsonl"))), compress=False
    )
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "onerror" not in page.split('id="looptap-data">')[0]
    data = page_data(page)
    said = [
        p.get("t") or (p.get("result") or {}).get("content") or ""
        for m in data["messages"]
        for p in m["parts"]
    ]
    # Kept as text, whole (U+2028/U+2029 shown as escapes, as in the terminal).
    for payload in PAYLOADS:
        shown = payload.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
        assert any(shown in t for t in said), payload


def _refused(*argv: str) -> str:
    """What the command says when it refuses ``argv`` (checked before anything is read or
    written, so in-process: no interpreter started)."""
    from looptap.cassettes.cli import build_parser
    from looptap.cassettes.errors import CassetteError

    args = build_parser().parse_args(argv)
    with pytest.raises(CassetteError) as info:
        args.func(args)
    return str(info.value)


def _looptap(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "looptap.cassettes.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )


def test_export_html_output_rules(demo_cassette: Path, tmp_path: Path) -> None:
    """The command's words and files in this process (``cli_run``); the page written to stdout by
    a process of it, byte for byte."""
    out = tmp_path / "run.html"
    done = cli_run("export", "--html", str(demo_cassette), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "11 turns as a web page" in done.stderr and out.stat().st_size > 0
    assert page_data(out.read_text())["totals"]["turns"] == 11
    first = out.read_bytes()
    again = _refused("export", "--html", str(demo_cassette), "-o", str(out))
    assert "exists" in again and "--force" in again
    assert (
        cli_run("export", "--html", str(demo_cassette), "-o", str(out), "--force").returncode == 0
    )
    assert out.read_bytes() == first, "the same run gives the same page"
    to_stdout = subprocess.run(
        [
            sys.executable,
            "-m",
            "looptap.cassettes.cli",
            "export",
            "--html",
            str(demo_cassette),
            "-o",
            "-",
        ],
        capture_output=True,
        cwd=REPO,
        check=False,
    )
    assert to_stdout.returncode == 0 and to_stdout.stdout == first
    # without -o: the run's name as NAME.html in the current directory (as import names its
    # cassette), never replaced unasked; was: refused, "--html writes to the file -o names"
    here = tmp_path / "here"
    here.mkdir()
    done = cli_run("export", "--html", str(demo_cassette), cwd=here)
    page = here / demo_cassette.with_suffix(".html").name
    assert done.returncode == 0 and f"→ {page.name}" in done.stderr, done.stderr
    assert page.read_bytes() == first and not demo_cassette.with_suffix(".html").exists()
    again = cli_run("export", "--html", str(demo_cassette), cwd=here)
    assert again.returncode == 2, again.stderr
    assert "exists (-o names another; --force replaces it)" in again.stderr
    assert page.read_bytes() == first
    assert "--html" in _refused("export", str(demo_cassette), "-o", str(tmp_path / "x.html"))
    assert "both name" in _refused(
        "export",
        "--html",
        str(demo_cassette),
        "-o",
        str(tmp_path / "a"),
        "--har",
        str(tmp_path / "a"),
    )


def test_mcp_points_to_the_page_and_its_command_writes_it(
    demo_cassette: Path, tmp_path: Path
) -> None:
    pytest.importorskip("mcp")
    import shlex

    from looptap.cassettes.mcp import build_server
    from tests.interop.test_mcp import _calls, _ok

    root = tmp_path / "runs"
    root.mkdir()
    (root / "demo.jsonl").write_bytes(demo_cassette.read_bytes())
    server = build_server([str(root)])
    (before,) = _ok(_calls(server, [("web_report", {"run": "demo.jsonl"})]))
    assert before["recorded"]["page"] is None
    done = subprocess.run(
        shlex.split(before["recorded"]["command"]),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (after,) = _ok(_calls(server, [("web_report", {"run": "demo.jsonl"})]))
    assert (
        after["recorded"]["page"] == str(root / "demo.jsonl.html")
        and Path(after["recorded"]["page"]).is_file()
    )


def test_without_the_html_extra_the_command_says_how_to_install(
    demo_cassette: Path, tmp_path: Path
) -> None:
    code = (
        "import sys; sys.modules['jinja2'] = None\n"
        "from looptap.cassettes.cli import main\n"
        f"sys.exit(main(['export', '--html', {str(demo_cassette)!r}, '-o', "
        f"{str(tmp_path / 'x.html')!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert done.returncode != 0
    assert "the html extra" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x.html").exists()


def test_start_up_imports_no_jinja2() -> None:
    """The report's modules load with the views package, imported plainly (issue 72: a small show
    measured 1.00x the CPU of 9dbacc33's); Jinja2 loads when a page is written."""
    code = (
        "import sys, looptap.cassettes.cli, looptap.cassettes.interop, looptap.cassettes.replay.testing.plugin\n"  # noqa: E501
        "from looptap.cassettes.mcp import cmd_mcp\nprint(sorted(m for m in ('jinja2',) "
        "if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert done.stdout.strip() == "[]"


def test_export_html_never_writes_through_a_link_nor_over_its_run(
    demo_cassette: Path, tmp_path: Path
) -> None:
    import stat

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "run.html"
    link.symlink_to(victim)
    for force in ([], ["--force"]):
        assert "is a symbolic link" in _refused(
            "export", "--html", str(demo_cassette), "-o", str(link), *force
        )
    assert victim.read_text() == "precious" and link.is_symlink()
    before = demo_cassette.read_bytes()
    assert "is the run it exports" in _refused(
        "export", "--html", str(demo_cassette), "-o", str(demo_cassette), "--force"
    )
    assert demo_cassette.read_bytes() == before
    out = tmp_path / "new.html"
    assert _looptap("export", "--html", str(demo_cassette), "-o", str(out)).returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600  # like the cassette it shows


def test_the_web_report_answer_asks_for_the_html_extra_only_where_it_is_missing(
    demo_cassette: Path, tmp_path: Path
) -> None:
    """The MCP ``web_report`` answer said the html extra was needed even where it is installed
    (issue 43): it is said only when Jinja2 cannot be imported by the interpreter the command
    names."""
    pytest.importorskip("jinja2")
    from looptap.cassettes.mcp.query import Runs, web_report

    run = tmp_path / "demo.jsonl"
    run.write_bytes(demo_cassette.read_bytes())
    here = web_report(Runs([tmp_path]), "demo.jsonl", 6000)
    assert "html extra" not in here["how"] and "install" not in here["how"], here["how"]
    code = (
        "import sys, json; sys.modules['jinja2'] = None\n"
        "from looptap.cassettes.mcp.query import Runs, web_report\n"
        f"print(json.dumps(web_report(Runs([{str(tmp_path)!r}]), 'demo.jsonl', 6000)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    missing = json.loads(done.stdout)
    assert "html extra" in missing["how"] and "pip install" in missing["how"], missing["how"]
    assert missing["recorded"]["command"] == here["recorded"]["command"]
