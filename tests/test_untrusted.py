"""The output boundary for untrusted text (cassettes/untrusted.py) and the CLI that goes through it:
the sanitiser on every kind of dangerous character, the JSON escaping round trip, and every printing
command run as a subprocess on a cassette whose every shown field is hostile."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.untrusted import (
    SafeTextStream,
    clean,
    clean_line,
    guard_stdio,
    has_unsafe,
    json_safe,
    strip_unsafe,
)
from tests.support import progress
from tests.support.analysed import cli_output

ROOT = Path(__file__).resolve().parents[1]
#: Bytes that must never reach a terminal: ESC, BEL, BS, C1 (UTF-8 encoded and bare), bidi,
#: zero-width.
RAW = (
    b"\x1b",
    b"\x07",
    b"\x08",
    "\x9b".encode(),
    "\x85".encode(),
    "\u202e".encode(),
    "\u2066".encode(),
    "\u200b".encode(),
)


# -- the sanitiser ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "␛[2J"),  # screen clear
        ("\x1b]52;c;cHduZWQ=\x07", "␛]52;c;cHduZWQ=␇"),  # OSC 52 clipboard write
        ("\x1b[1A\x1b[31m", "␛[1A␛[31m"),  # cursor move, colour
        ("a\rb", "a␍b"),
        ("\x00\x08\x7f", "␀␈␡"),
        ("\x9b32m", "\\x9b32m"),  # one-character CSI (C1)
        ("\x85", "\\x85"),
        ("abc\u202eevil", "abc\\u202eevil"),  # right-to-left override
        ("\u2066x\u2069", "\\u2066x\\u2069"),  # isolates
        ("a\u200bb\u200d", "a\\u200bb\\u200d"),  # zero-width
        ("\ufeffx", "\\ufeffx"),
        ("line\u2028sep", "line\\u2028sep"),
        ("\ud83d", "\\ud83d"),  # a lone surrogate
        ("\U000e0041", "\\U000e0041"),  # a tag character
    ],
)
def test_clean_shows_every_control_visibly(raw: str, shown: str) -> None:
    assert clean(raw) == shown
    assert not has_unsafe(clean(raw))
    assert has_unsafe(raw)


def test_newlines_and_tabs_are_kept_by_clean_and_shown_by_clean_line() -> None:
    assert clean("a\nb\tc") == "a\nb\tc"
    assert clean_line("a\nb\tc") == "a␤b c"
    assert "\n" not in clean_line("x\n" * 5)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain ASCII [bold] text",
        "日本語のテキスト",
        "emoji 🎉👩‍💻🇫🇷",
        "naïve café — “quotes”",
        "עברית",
    ],
)
def test_plain_text_is_unchanged(text: str) -> None:
    # The ZWJ inside the family emoji is a joiner: it is shown, so only texts without one are
    # unchanged.
    if "\u200d" in text:
        assert "\\u200d" in clean(text)
    else:
        assert clean(text) == text
        assert clean_line(text) == text
        assert strip_unsafe(text) == text


@given(st.text())
def test_cleaned_text_is_always_safe_and_cleaning_is_stable(text: str) -> None:
    once = clean(text)
    assert not has_unsafe(once)
    assert clean(once) == once  # idempotent on its own output
    assert "\n" not in clean_line(text) and not has_unsafe(clean_line(text))
    assert not has_unsafe(strip_unsafe(text))


def test_strip_unsafe_keeps_the_width() -> None:
    assert strip_unsafe("a\x1b[2Jb\u202ec\ud800") == "a[2Jbc\ufffd"


# -- JSON written to a terminal or a file --------------------------------------------------------


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=10,
    )
)
def test_json_safe_round_trips_to_the_same_value(value: object) -> None:
    try:
        data = orjson.dumps(value)
    except orjson.JSONEncodeError:  # lone surrogates are not JSON
        return
    safe = json_safe(data)
    assert orjson.loads(safe) == value
    assert json.loads(safe.decode()) == value
    text = safe.decode("utf-8")
    assert not has_unsafe(text)


def test_json_safe_escapes_c1_bidi_and_zero_width_that_orjson_emits_raw() -> None:
    value = {"t": "x\x9b2J\u202eevil\u200b\u2028\x85"}
    raw = orjson.dumps(value)
    assert "\u202e".encode() in raw  # orjson leaves it raw: the reason for json_safe
    safe = json_safe(raw)
    assert safe == b'{"t":"x\\u009b2J\\u202eevil\\u200b\\u2028\\u0085"}'
    assert orjson.loads(safe) == value


def test_safe_streams_clean_text_and_bytes_even_split_across_writes() -> None:
    raw = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    stream = SafeTextStream(raw)
    stream.write("a\x1b[2J")
    assert stream.buffer is not None
    bidi = "\u202e".encode()
    stream.buffer.write(b'"' + bidi[:1])
    stream.buffer.write(bidi[1:] + b'"')
    stream.flush()
    out = raw.buffer.getvalue()  # type: ignore[attr-defined]
    assert out == b'a\xe2\x90\x9b[2J"\\u202e"'


def test_guard_stdio_wraps_and_restores() -> None:
    before = sys.stdout
    with guard_stdio():
        assert isinstance(sys.stdout, SafeTextStream) and isinstance(sys.stderr, SafeTextStream)
    assert sys.stdout is before


# -- every printing command on a hostile cassette -------------------------------------------------


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.hostile.corpus import hostile_exchanges

    path = tmp_path_factory.mktemp("hostile") / "hostile.jsonl"
    exchanges = hostile_exchanges()
    assert len(exchanges) >= 6  # text, reasoning, tools, errors, headers, models, labels, URLs
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(ex)
    return path


def _looptap(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", *args], cwd=cwd, capture_output=True
    )


#: The cases run as a process (a terminal's bytes as the interpreter writes them: a printed run,
#: JSON on stdout, an error line); the others run through ``main`` in this process, the same bytes
#: checked (every command also runs as a process on hostile files in tests/hostile/test_matrix.py).
AS_PROCESS = ("show", "export-otel-stdout", "error-line")


def _in_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    with contextlib.chdir(cwd):
        rc, out, err = cli_output(*args)
    return subprocess.CompletedProcess(["looptap", *args], rc, out, err.encode("utf-8", "replace"))


@pytest.mark.parametrize(
    "args",
    [
        ["show", "{f}"],
        ["show", "{f}", "--json"],
        ["textconv", "{f}"],
        ["diff", "{f}", "{f}"],
        ["verify", "{f}"],
        ["export", "{f}", "--har", "{d}/out.har"],
        ["export", "{f}", "--otel", "{d}/out.otlp"],
        ["export", "{f}", "--otel", "-"],
        ["import", "{f}", "-o", "{d}/imported.jsonl"],
        ["show", "{d}/missing\x1b[2J.jsonl"],  # an error line naming hostile input
    ],
    ids=[
        "show",
        "show-json",
        "textconv",
        "diff",
        "verify",
        "export-har",
        "export-otel",
        "export-otel-stdout",
        "import",
        "error-line",
    ],
)
def test_no_command_writes_raw_controls_or_a_traceback(
    hostile: Path, tmp_path: Path, args: list[str], request: pytest.FixtureRequest
) -> None:
    argv = [a.replace("{f}", str(hostile)).replace("{d}", str(tmp_path)) for a in args]
    run = _looptap if request.node.callspec.id in AS_PROCESS else _in_process
    proc = run(*argv, cwd=tmp_path)
    for name, stream in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        assert b"Traceback" not in stream, (name, stream[-2000:])
        leaked = [r for r in RAW if r in stream]
        assert not leaked, (name, leaked, stream[:300])
    assert proc.stdout or proc.stderr  # the user is told something
    if argv[0] == "show" and len(argv) == 2 and "missing" not in argv[1]:
        assert proc.returncode == 0, proc.stderr[-500:]
        out = proc.stdout.decode("utf-8")
        assert "␛]52;c;" in out and "\\u202e" in out  # shown visibly, not dropped
    if "--json" in argv or argv[-1] == "-":
        assert proc.returncode == 0, proc.stderr[-500:]
        assert all(json.loads(line) is not None for line in proc.stdout.splitlines())
    for written in tmp_path.glob("out.*"):  # exports that people open in terminals and editors
        data = written.read_bytes()
        assert not [r for r in RAW if r in data], written.name
        if written.suffix == ".har":  # one indented document
            assert json.loads(data)["log"]["entries"]
        else:  # OTLP: one request per line
            assert all(json.loads(line) is not None for line in data.splitlines() if line.strip())


def test_the_unsafe_table_is_unicodes_classes_for_this_python() -> None:
    """cassettes/unsafe_chars.py (generated by bench/unicode_unsafe.py) covers every Cc, Cf, Zl,
    Zp and Cs character of this Python's unicodedata, and only those, the
    Default_Ignorable_Code_Point ranges and the noncharacters; clean() shows each of them and
    nothing else."""
    import unicodedata

    from looptap.cassettes import unsafe_chars

    assert unsafe_chars.UNIDATA_VERSION == unicodedata.unidata_version, (
        "regenerate with bench/unicode_unsafe.py"
    )
    covered = bytearray(0x110000)
    for lo, hi in unsafe_chars.RANGES:
        covered[lo : hi + 1] = b"\x01" * (hi - lo + 1)
    for cp in range(0x110000):
        ch = chr(cp)
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs"):
            assert covered[cp], f"U+{cp:04X}"
        if ch in "\n\t":
            assert clean(ch) == ch
        elif covered[cp]:
            assert (
                has_unsafe(ch) and not has_unsafe(clean(ch)) and strip_unsafe(ch) in ("", "\ufffd")
            ), f"U+{cp:04X}"
    for cp in (
        0x034F,
        0x115F,
        0x17B4,
        0x17B5,
        0x180F,
        0x3164,
        0xFE00,
        0xFE0F,
        0xFFA0,
        0xE0001,
        0xE0100,
        0xE01EF,
        0xE0FFF,
        0x13430,
        0x1BCA0,
        0x1D173,
        0xFDD0,
        0x10FFFF,
    ):
        assert covered[cp], f"U+{cp:04X} (default ignorable, format or noncharacter)"
    for ok in ("héllo", "日本語", "😀", "Ωμέγα", "→ ✓ ▲", "٠١٢", "\u00a0"):
        assert clean(ok) == ok


@pytest.mark.parametrize(
    "ch",
    [
        "\ufe00",
        "\ufe0f",
        "\U000e0100",
        "\U000e01ef",
        "\u034f",
        "\u17b4",
        "\U00013430",
        "\U0001bca0",
        "\U0001d173",
    ],
)
def test_variation_selectors_and_format_characters_are_shown(ch: str) -> None:
    assert clean("a" + ch + "b") != "a" + ch + "b" and not has_unsafe(clean("a" + ch + "b"))


def test_every_unsafe_character_is_found_in_ascii_and_other_text() -> None:
    """What ``clean`` finds unsafe, found fast (issue 73: the whole class costs ~1 µs a character,
    most of show's printing; the ASCII part is tested by a small class, only the other characters
    by the whole one): for every code point, inside ASCII and inside non-ASCII text, exactly the
    characters of the table (newline and tab kept)."""
    from looptap.cassettes.unsafe_chars import RANGES
    from looptap.cassettes.untrusted import has_unsafe

    unsafe = bytearray(0x110000)
    for lo, hi in RANGES:
        unsafe[lo : hi + 1] = b"\x01" * (hi + 1 - lo)
    unsafe[ord("\n")] = unsafe[ord("\t")] = 0
    for before, after in (("ab", "cd"), ("é", "…")):
        texts = (before + chr(c) + after for c in range(0x110000))
        assert bytes(map(has_unsafe, texts)) == bytes(unsafe), before + after
    assert clean("plain … text\n") == "plain … text\n"
    assert clean("a\x1b[31m …") == "a␛[31m …"
