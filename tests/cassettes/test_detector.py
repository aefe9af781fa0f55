"""The shared secret detector: gitleaks' rules translated to Python, looptap's own, no finds in
real traffic."""

from __future__ import annotations

import importlib.util
import random
import re
from pathlib import Path

import pytest

from looptap.cassettes.recording import default_detector
from looptap.cassettes.storage import load_vcr
from tests.support.secret_streams import spoken, vendor_keys

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
#: The maintainer's script that writes gitleaks_rules.py (not part of the package).
_REFRESH = Path(__file__).resolve().parents[2] / "bench" / "gitleaks_refresh.py"


def translate(rx: str) -> str:
    spec = importlib.util.spec_from_file_location("looptap_bench_gitleaks_refresh", _REFRESH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out: str = mod.translate(rx)
    return out


def test_go_regex_dialect_is_translated() -> None:
    # A mid-pattern (?i) scoped to its group; the closing delimiter group becomes a look-ahead.
    assert (
        translate(r"""\b(SG\.(?i)[a-z0-9]{3})(?:[\x60'"\s;]|\\[nr]|$)""")
        == r"\b(SG\.(?i:[a-z0-9]{3}))(?![A-Za-z0-9])"
    )
    assert translate(r"(?i)[\w.-]{0,50}?(?:okta)x") == r"(?i)(?:okta)x"
    assert translate(r"a\z") == r"a\Z"


def test_every_rule_compiles_and_the_set_is_large() -> None:
    rules = default_detector().rules
    assert len(rules) > 200
    for r in rules:
        assert isinstance(r.pattern, re.Pattern), r.id


def test_every_vendor_format_is_known_in_prose() -> None:
    d = default_detector()
    for vendor, key in vendor_keys().items():
        text = f"The {vendor} key is {spoken(vendor, key)}. Keep it."
        assert any(
            text[s:e] in (key, spoken(vendor, key)) or key in text[s:e] for _, s, e in d.find(text)
        ), vendor


def test_real_traffic_has_no_finds() -> None:
    """The twin: 150 recorded exchanges' bodies (real requests and streams, keys already scrubbed
    by their recorders) hold nothing the detector calls a secret."""
    d = default_detector()
    files = sorted(CORPUS.glob("pydantic-ai/**/*.yaml"))[:150]
    assert len(files) == 150
    seen = 0
    for f in files:
        for ex in load_vcr(f):
            for data in (ex.request_body, b"".join(c for _, c in ex.response_chunks)):
                text = data.decode("utf-8", "replace")
                seen += len(text)
                assert d.find(text) == [], (
                    f.name,
                    [(rid, text[s - 10 : e + 5]) for rid, s, e in d.find(text)][:3],
                )
    assert seen > 1_000_000


def test_a_keyword_across_the_search_windows_border_is_found() -> None:
    """The keyword search reads a window at a time (bounded memory): a key whose keyword straddles
    a window's border is found all the same, at every offset around it."""
    from looptap.cassettes.recording import WINDOW

    d = default_detector()
    key = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hI6"
    for shift in range(-6, 3):
        pad = WINDOW + shift
        text = "x " * (pad // 2) + "." * (pad % 2) + key + " done"
        assert text.index(key) == pad
        assert {text[s:e] for _, s, e in d.find(text)} == {key}, shift


def test_the_keyword_search_of_a_large_body_holds_a_bounded_memory() -> None:
    """A 16 MB body: the detector's peak memory stays within a small multiple of it. The automaton's
    answer for the whole text took eight bytes a character (a 100 MB body: +900 MB in the
    recorder's writer, 1,493 MB peak; show of the five-bomb file 836 MB)."""
    import subprocess
    import sys

    code = (
        "import resource\n"
        "from looptap.cassettes.recording import default_detector\n"
        "d = default_detector(); d.spans('warm-up sk-')\n"
        "text = '0123456789abcdef' * (1 << 20)\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "assert d.spans(text) == []\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    grown_mb = int(out.stdout.strip())
    assert grown_mb < 3 * 16, f"+{grown_mb} MB for a 16 MB body"


def test_the_markers_of_a_url_password_masked_are_no_secret_in_any_case() -> None:
    """A URL's masked password (``[REDACTED]``) is the redaction's own marker; a kept analysis
    keeps some texts case-folded (the rendered-history lookups: tool results too), and ``verify``
    of it flagged ``[redacted]`` as a password (session 48's fresh-clone run of
    tests/reliability/test_tool_secrets.py). Any other password is still found."""
    d = default_detector()
    for masked in ("[REDACTED]", "[redacted]", "REDACTED", "redacted"):
        assert d.find(f"db is postgres://app:{masked}@db.internal:5432/x") == [], masked
    assert d.find("db is postgres://app:hunter2-Xq9vLr7@db.internal:5432/x") != []


def test_the_scans_read_by_c_find_what_the_regexes_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 106 (the gate's cost): a name's words found by Aho-Corasick over the text
    lower-cased, base64's runs by ``bytes.find`` and one level's escaped blanks by ``str.replace``
    find exactly what the regexes did: at every window's border, with the four characters
    ``(?i)`` reads as an ASCII letter and ``str.lower`` does not, lone surrogates, other
    non-ASCII text."""
    from looptap.cassettes.recording import _detector, _sealing

    named = next(r for r in default_detector().rules if isinstance(r, _detector.NamedRule))
    blank = re.compile(r"\\+([ntr])")  # (the one regex _spaced was)

    def spaced(view: str) -> str:
        return blank.sub(lambda m: " " * (len(m.group(0)) - 1) + "\n\t\r"["ntr".index(m[1])], view)

    rng = random.Random(106)
    pieces = [*_detector._NAME_WORDS, "PASS", "Token", "ſ", "\u212a", "İ", "ı", "é", "\udcff",
              "a", "B", "9", "+", "/", "_", "-", "=", " ", "\n", "\\", "\\n", "\\\\t", "r",
              "b" * 19]  # fmt: skip
    texts = ["".join(rng.choices(pieces, k=rng.randint(0, 40))) for _ in range(3000)]
    real = sorted(CORPUS.glob("pydantic-ai/**/*.yaml"))[:20]
    texts += [f.read_text("utf-8", "replace")[:30_000] for f in real]
    for window in (20, 23, 64, _detector.WINDOW):
        monkeypatch.setattr(_detector, "WINDOW", window)
        for text in texts:
            assert list(named.hits(text)) == [m.span() for m in _detector._NAME_HIT.finditer(text)]
            runs = [m.span() for m in _detector._B64_RUN.finditer(text)]
            assert list(_detector._b64_runs(text)) == runs, (window, text[:80])
    for text in texts:
        assert _sealing._spaced(text) == spaced(text)


def test_a_rule_tried_at_line_starts_finds_what_finditer_does() -> None:
    """Issue 106 (the gate's cost): the ``.pgpass`` rule's regex, tried only at the line start
    before each hit of its pre-check (:class:`~cassettes.recording._detector.LineRule`), finds
    exactly what ``finditer`` does: lines at the text's start, after a newline, after JSON's
    ``\\n`` and after other escapes, IPv6 hosts whose colons pass the pre-check, several lines
    on one, a real recording's text as it is and held in a JSON string."""
    from looptap.cassettes.recording import _detector

    lines = [r for r in default_detector().rules if isinstance(r, _detector.LineRule)]
    # (what LineRule reads of a rule: its match begins at a line's start, its pre-check is given)
    assert [r.id for r in lines] == [".pgpass line"]
    assert all(r.source.startswith(r"(?:^|\n|\\n)") and r.pre is not None for r in lines)
    rule = lines[0]
    regex = re.compile(rule.source)
    rng = random.Random(106)
    pieces = ["db.host", "*", ":5432:", ":*:", ":", "5432", "\\n", "\n", "\\", "n", "\\\\n",
              "user", "pw_s3cret", "[::1]", "[a:1:b]", "10.0.0.1", " ", '"', '\\"', "\r", "x",
              "h:5432:db:user:hunter22", "*:*:*:*:s3cretpw", "04:41:07"]  # fmt: skip
    texts = ["".join(rng.choices(pieces, k=rng.randint(0, 30))) for _ in range(20_000)]
    real = sorted(CORPUS.glob("pydantic-ai/**/*.yaml"))[:20]
    for f in real:
        text = f.read_text("utf-8", "replace")[:30_000]
        texts += [text, orjson_string(text), orjson_string(text).replace("\\n", "\\n*:5:d:u:pw12")]
    found = 0
    for text in texts:
        want = [m.span() for m in regex.finditer(text)]
        assert [m.span() for m in rule.matches(text)] == want, text[:200]
        found += bool(want)
    assert found > 2_000  # (the texts hold lines of every kind the rule reads)
    assert default_detector().find("note\\nlocalhost:5432:app:admin:Xq9vLr7pw\\n") != []


def orjson_string(text: str) -> str:
    """``text`` as a JSON string (escapes of quotes, backslashes and newlines)."""
    import orjson

    return orjson.dumps(text).decode()


@pytest.mark.parametrize("end", ["\\n", "\\r\\n", "\n"])
def test_a_pgpass_line_in_a_json_string_is_masked_by_the_gate(end: str) -> None:
    """A ``.pgpass`` line written in a JSON string, its line ended by JSON's escape (``\\n``,
    ``\\r\\n``) or by a real one, is masked by ``seal``: the gate reads JSON's escaped blanks
    as a space and the blank (``_spaced``), which the rule's end took for more of the line (found
    by session 57's gate helper: ``{"content":"db\\n…:Xq9vLr7pw\\n"}`` was kept as it was)."""
    from looptap.cassettes.recording import seal

    pw = "Xq9vLr7pw"
    line = f"localhost:5432:app:admin:{pw}"
    text = ('{"content":"db' + ("\\n" if end != "\n" else "\n") + line + end + '"}').encode()
    assert pw.encode() not in bytes(seal(text))
    # (a line that goes on after a space is no .pgpass line)
    assert pw.encode() in bytes(seal(text.replace(pw.encode(), pw.encode() + b" and more")))


def test_a_levels_keywords_are_the_level_befores_but_those_an_escape_can_make(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 106 (the gate's cost): a level of JSON's escapes read (``seal``'s) takes its
    keywords from the level before (:meth:`~cassettes.recording._detector.Detector.unescaped`),
    searching again only those an escape can make or unmake (``://``, ``bearer ``), and each
    search finds what ``in`` finds (two-character keywords by their literal's regex): at every
    level of fixed-seed texts of keywords, escapes of every kind, blanks, the letters
    ``str.lower`` reads apart and lone surrogates, at windows' borders, and real recordings held
    in one and two JSON strings. A key whose keyword only an escape read makes is masked."""
    from looptap.cassettes.recording import _detector, _sealing

    d = default_detector()

    def searched(text: str) -> frozenset[str]:  # (what `in` finds, a keyword at a time)
        low = text.lower().encode("utf-8", "replace").decode("utf-8")
        return frozenset(k for r in d.rules for k in r.keywords if k in low)

    rng = random.Random(1060)
    words = sorted({k for r in d.rules for k in r.keywords})
    pieces = [*rng.sample(words, 40), "://", "bearer ", "<add key=", "sk", "ey", "s.", "--", "q~",
              ":", "Bearer", "BEARER ", ":\\/\\/", "\\", "\\\\", '\\"', "\\/", '"', "/", " ",
              "\\n", "\\\\n", "\\\\\\n", "\\t", "\\r", "n", "İ", "Σ", "ſ", "\u212a", "é", "\udcff",
              "a", "K", "9", "-", "_"]  # fmt: skip
    texts = ["".join(rng.choices(pieces, k=rng.randint(0, 30))) for _ in range(4000)]
    for f in sorted(CORPUS.glob("pydantic-ai/**/*.yaml"))[:10]:
        text = f.read_text("utf-8", "replace")[:20_000]
        texts += [orjson_string(text), orjson_string(orjson_string(text))]
    cases = []  # each text's levels as seal reads them, with what `in` finds in each
    for text in texts:
        view, levels = text, [_sealing._spaced(text)]
        for _ in range(_sealing.LEVELS):
            if _sealing._ESCAPE.search(view) is None:
                break
            view = _sealing._unescaped(view)[0]
            levels.append(_sealing._spaced(view))
        cases.append([(spaced, searched(spaced)) for spaced in levels])
    assert sum(len(c) - 1 for c in cases) > 3_000  # (the texts hold escapes of every level)
    for window in (16, 23, _detector.WINDOW):
        monkeypatch.setattr(_detector, "WINDOW", window)
        for case in cases:
            present = d.keywords(case[0][0])
            assert present == case[0][1], (window, case[0][0][:80])
            for spaced, want in case[1:]:
                present = d.unescaped(present, spaced)
                assert present == want, (window, case[0][0][:80], spaced[:80])
    for slash in (b"\\/", b"\\\\/"):  # (JSON's escape of a slash, and it held in JSON)
        planted = b'{"note": "db at postgres:%s%sapp:Xq9vLr7-hunter2@db.internal:5432/x"}' % (
            slash,
            slash,
        )
        assert b"://" not in planted and b"hunter2" not in _sealing.seal(planted)
