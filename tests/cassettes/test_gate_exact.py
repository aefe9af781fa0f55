"""Issue 106 (session 56, the gate's cost): the redactor's gate over what the kept analysis writes
reads less and finds exactly what it found: a gitleaks regex that begins with ``\\b`` is tried only
where the rest of it matches somewhere (its implied pre-check), a name no place makes a
credential's is not read for its value, a name's characters are read by regex, one level of JSON's
escapes is read by ``split``. Each is compared with what it replaced, on fixed-seed texts, real
recordings and planted keys."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path

from looptap.cassettes.recording import _detector, _sealing, default_detector
from looptap.cassettes.recording._detector import Detector, Rule, implied_pre
from tests.support.secret_streams import vendor_keys

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _real(n: int, cut: int) -> list[str]:
    return [f.read_text("utf-8", "replace")[:cut] for f in sorted(CORPUS.glob("*/**/*.yaml"))[:n]]


def _r(
    rng: random.Random, n: int, chars: str = "abcdefghijkmnopqrstuvwxyzABCDEFGH0123456789"
) -> str:
    return "".join(rng.choices(chars, k=n))


def test_a_regex_led_by_an_assertion_runs_where_its_rest_matches() -> None:
    """Each rule whose regex begins (after its flags) with ``\\b`` or a lookbehind (the JWT's,
    AWS', Vault's, ``--password``'s: 70 or more) and has no pre-check of its own has that regex
    without it as its pre-check, and the detector finds with them exactly what it finds without
    them: in real recordings, with keys of every vendor and of those formats planted at the start,
    inside words, after quotes and escapes, and around them."""
    from looptap.cassettes.recording._formats import PREFILTERS

    assert implied_pre(r"\bfoo") == "foo" and implied_pre(r"(?i)\b(x)") == "(?i)(x)"
    assert implied_pre(r"(?i)(?<![\w-])--x") == "(?i)--x"
    assert implied_pre(r"(?<=[(])x") == "x" and implied_pre(r"(?<=(a))b") is None
    assert implied_pre("(?i)key") is None and implied_pre("a\\b") is None
    d = default_detector()
    led = [r for r in d.rules if type(r) is Rule and r.id not in PREFILTERS
           and implied_pre(r.source) is not None]  # fmt: skip
    assert len(led) >= 70
    assert all(r.pre_src == implied_pre(r.source) and r.pre is not None for r in led)
    bare = Detector(
        [Rule(r.id, r.source, r.keywords, r.entropy, r.group, r.allow_src, r.stopwords)
         if r in led else r for r in d.rules]
    )  # fmt: skip
    rng = random.Random(56)
    hexa = "0123456789abcdef"
    keys = [*vendor_keys().values(), f"eyJ{_r(rng, 20)}.eyJ{_r(rng, 24)}.{_r(rng, 30)}",
            "AKIA" + _r(rng, 16, "ABCDEFGHIJ234567"),
            "AIza" + _r(rng, 35), "hvs." + _r(rng, 100), "s." + _r(rng, 24), "fo1_" + _r(rng, 43),
            "EAAA" + _r(rng, 40), "LTAI" + _r(rng, 20), "dapi" + _r(rng, 32, hexa),
            "4b1d" + _r(rng, 38), "EAAM" + _r(rng, 110), "API-" + _r(rng, 26, "ABCDEF0123456789"),
            "--password Xq9vLr7pw", "--api-key " + _r(rng, 20), "--no-password x",
            "curl -u bob:s3cr3tpw", "mysql -pS3cretPass9", "npm_" + _r(rng, 36)]  # fmt: skip
    glue = ["", " ", "x", "_", '"', '\\"', "\\n", "=", ": ", "token ", "ey", "s.", "-", "key", "\n"]
    texts = [t for t in _real(40, 20_000)]
    texts += ["".join(rng.choice([*keys, *glue, *glue]) for _ in range(rng.randint(1, 12)))
              for _ in range(1500)]  # fmt: skip
    found: dict[str, int] = {}
    for text in texts:
        want = bare.find(text)
        assert d.find(text) == want, text[:120]
        for rid, _, _ in want:
            found[rid] = found.get(rid, 0) + 1
    ids = {r.id for r in led}
    assert sum(n for rid, n in found.items() if rid in ids) > 500
    assert {"jwt", "aws-access-token", "password on a command line"} <= found.keys()


def _old_named_spans(named: _detector.NamedRule, text: str) -> Iterator[tuple[int, int]]:
    """NamedRule.spans before session 56: a name read a character at a time, each read for its
    value."""
    skip = 0
    for start, end in named.hits(text):
        if start < skip:
            continue
        a, b = start, end
        while a > 0 and text[a - 1] in _detector._NAME_CHARS and start - a < 64:
            a -= 1
        while b < len(text) and text[b] in _detector._NAME_CHARS and b - end < 64:
            b += 1
        skip = b
        found = named._value(text, a, b)
        if found is not None:
            skip = found[1]
            yield found


def test_a_name_no_place_makes_a_credentials_is_not_read_for_its_value() -> None:
    """A credential's name is read a regex at a time, and one that no place makes a credential's
    (``max_tokens``, ``input_tokens``) is not read for its value: the same finds as before, in
    fixed-seed texts of names in every place (JSON, a query, XML, a form, an env line, prose),
    long names, values of every kind, and in real recordings; no name skipped is given one."""
    named = next(r for r in default_detector().rules if isinstance(r, _detector.NamedRule))
    rng = random.Random(560)
    names = ["api_key", "max_tokens", "input_tokens", "password", "auth", "token", "sessid",
             "session_id", "Token", "x" * 70 + "_secret", "pin", "code", "keys", "OPENAI_API_KEY",
             "db.password", "cookie", "jwt", "bearer"]  # fmt: skip
    glue = ['"', "'", ":", "=", " ", ": ", '": "', "=", "&", "?", "<", ">", "</", "\n", "\\n",
            'name="', "\r\n\r\n", "export ", "-", ".", "/", "@", "Bearer ", ","]  # fmt: skip
    values = ["hunter2", "s3cr3t-Xq9vLr7pw", "null", "4096", "os.environ[x]", "${TOKEN}", "abc",
              _r(rng, 40), "[REDACTED]", "auth.example.com:8443"]  # fmt: skip
    texts = ["".join(rng.choice([*names, *glue, *glue, *values]) for _ in range(rng.randint(0, 30)))
             for _ in range(6000)]  # fmt: skip
    texts += _real(20, 30_000)
    found = skipped = 0
    for text in texts:
        want = list(_old_named_spans(named, text))
        assert list(named.spans(text)) == want, text[:200]
        found += len(want)
        for start, end in named.hits(text):
            a = start - _detector._NAME_RUN.match(text[max(0, start - 64) : start][::-1]).end()  # type: ignore[union-attr]
            b = _detector._NAME_RUN.match(text, end).end()  # type: ignore[union-attr]
            if _detector._nameless(text[a:b].strip(".-")):
                skipped += 1
                assert named._value(text, a, b) is None, text[a : b + 20]
    assert found > 500 and skipped > 2000, (found, skipped)


def _old_unescaped(text: str) -> tuple[str, list[int]]:
    out: list[str] = []
    removed: list[int] = []
    at = 0
    for n, m in enumerate(_sealing._ESCAPE.finditer(text)):
        out += [text[at : m.start()], text[m.start() + 1]]
        removed.append(m.start() - n)
        at = m.end()
    out.append(text[at:])
    return "".join(out), removed


def test_one_level_of_escapes_read_by_split_is_what_the_loop_read() -> None:
    """One level of JSON's escapes read (``seal``'s next level) by ``split``: the same text and
    the same places of each escape's character as the loop over the escapes gave, for texts of
    every run of backslashes before a quote, a slash, a letter, and real recordings held in one
    and two JSON strings."""
    import orjson

    rng = random.Random(5600)
    pieces = ["\\", "\\\\", '\\"', "\\/", '"', "/", "n", "\\n", "a", "é", "\udcff", " ", "\\\\\\"]
    texts = ["".join(rng.choices(pieces, k=rng.randint(0, 25))) for _ in range(5000)]
    for text in _real(10, 20_000):
        once = orjson.dumps(text).decode()
        texts += [once, orjson.dumps(once).decode()]
    for text in texts:
        assert _sealing._unescaped(text) == _old_unescaped(text)
    assert re.search(r"\\", "".join(texts[-2:]))
