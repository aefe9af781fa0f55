"""Issue 106 (session 56, the gate's cost): the redactor's gate over what the kept analysis writes
reads less and finds exactly what it found: a gitleaks regex that begins with ``\\b`` is tried only
where the rest of it matches somewhere (its implied pre-check), a name no place makes a
credential's is not read for its value, a name's characters are read by regex, one level of JSON's
escapes is read by ``split``. Each is compared with what it replaced, on fixed-seed texts, real
recordings and planted keys."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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


def _levels(text: str) -> list[tuple[str, list[int]]]:
    """``text``'s levels as ``seal`` reads them: each spaced, with the places (in the level
    before) of the characters the level took out."""
    view = text
    levels: list[tuple[str, list[int]]] = [(_sealing._spaced(text), [])]
    for _ in range(_sealing.LEVELS):
        if _sealing._ESCAPE.search(view) is None:
            break
        view, removed = _sealing._unescaped(view)
        levels.append((_sealing._spaced(view), [at + n for n, at in enumerate(removed)]))
    return levels


def _names(named: _detector.NamedRule, text: str) -> Iterator[str]:
    """The names ``named`` reads in ``text`` until one is read for its value, each once."""
    skip = 0
    for start, end in named.hits(text):
        if start >= skip:
            a = start - _detector._NAME_RUN.match(text[max(0, start - 64) : start][::-1]).end()  # type: ignore[union-attr]
            skip = _detector._NAME_RUN.match(text, end).end()  # type: ignore[union-attr]
            yield text[a:skip]
            if not _detector._nameless(text[a:skip].strip(".-")):
                return


def _level_free(source: str) -> bool:
    """Whether every match of the regex ``source`` holds no backslash nor space, and no quote nor
    slash but as its first character (a literal), and the regex asserts nothing of what stands
    around it: read from its parse (literals, classes of them, ranges, digits, word characters,
    repeats, groups, alternatives; anything else is not)."""
    from re import _parser  # type: ignore[attr-defined]

    def ok(items: Any, banned: str) -> bool:
        for op, av in items:
            name = str(op)
            if name == "LITERAL":
                if chr(av) in banned:
                    return False
            elif name == "IN":
                for o, a in av:
                    kind = str(o)
                    if kind == "LITERAL" and chr(a) not in banned:
                        continue
                    if kind == "RANGE" and not any(a[0] <= ord(c) <= a[1] for c in banned):
                        continue
                    if kind == "CATEGORY" and str(a) in ("CATEGORY_DIGIT", "CATEGORY_WORD"):
                        continue
                    return False
            elif name in ("MAX_REPEAT", "MIN_REPEAT"):
                if not ok(av[2], banned):
                    return False
            elif name == "SUBPATTERN":
                if not ok(av[3], banned):
                    return False
            elif name == "BRANCH":
                if not all(ok(b, banned) for b in av[1]):
                    return False
            else:
                return False
        return True

    parsed = list(_parser.parse(source))
    first = parsed[:1] if parsed and str(parsed[0][0]) == "LITERAL" else []
    return ok(first, "\\ ") and ok(parsed[len(first) :], '\\ "/')


def test_what_a_level_tells_the_next_is_what_the_next_finds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 106 (session 57): what a text's level tells the next (``Keywords.checked``) is
    what the next finds: the pre-checks of ``LEVEL_FREE``'s rules (``.pgpass``'s port,
    Discord's dots, Asana's id) are searched once for all of a text's levels, and a level
    whose names ``NamedRule`` read none of for its value (``input_tokens``) is not read by it
    again. In fixed-seed texts of ports, dots, ids, names, values, escapes of every kind and
    blanks: a level is the level before with characters taken out, each a backslash or a
    space that a backslash, a space, a quote or a slash follows (what ``Detector.unescaped``,
    ``LEVEL_FREE`` and ``NamedRule`` rest on), each of those pre-checks answers alike at every
    level (a regex whose match holds a slash past its first character does not: the twin),
    ``NamedRule`` reads a name for its value at each level or at none, and ``seal``'s spans
    are those found with each level searched anew (a ``.pgpass`` line, Discord and Asana
    tokens and passwords held in one and two JSON strings, each masked, among them)."""
    import orjson

    from looptap.cassettes.recording._formats import LEVEL_FREE

    d = default_detector()
    shared = {r for r in d.rules if r.id in LEVEL_FREE}
    pres = [r.pre for r in shared if r.pre is not None]
    assert len(shared) == len(pres) == 3
    assert all(_level_free(pre.pattern) for pre in pres)
    assert not any(map(_level_free, [r"(?i)password[ \t]", r"\d/\d", r"\ba", r"[^x]", r"\s"]))
    rng = random.Random(57)
    discord = f"MT{_r(rng, 24)}.{_r(rng, 6)}.{_r(rng, 38)}"
    digits = "0123456789"
    asana = f"2/{_r(rng, 16, digits)}/{_r(rng, 16, digits)}:{_r(rng, 32, digits + 'abcdef')}"
    pgpass = "localhost:5432:app:admin:Xq9vLr7pw"
    pieces = [":5432:", ":*:", ":", "5432", "12", ".", "abc_ef", "/1234567890", "/", "\\/", "3\\/4",
              "\\\\", '\\"', '"', "\\", "\\n", "\\\\n", "\\\\\\t", " ", "n", "t", "x", "\n", "é",
              "\udcff", discord, asana, pgpass, "password", "input_tokens", "api_key", "Token",
              "keys", "echo_key", '":"', '\\":\\"', "=", "hunter2-Xq9vLr7pw", "null"]  # fmt: skip
    texts = ["".join(rng.choices(pieces, k=rng.randint(0, 30))) for _ in range(4000)]
    texts.append(f"db\n{pgpass}\n")
    for planted in (f"bot {discord} ok", f"asana: {asana} sync", {"password": "hunter2-Xq9vLr7"}):
        once = orjson.dumps({"content": planted}).decode()
        texts += [once, orjson.dumps({"arguments": once}).decode()]
    named = next(r for r in d.rules if isinstance(r, _detector.NamedRule))
    twin = re.compile(r"\d/\d")
    deeper = differs = read = 0
    for text in texts:
        levels = _levels(text)
        for (before, _), (after, out) in itertools.pairwise(levels):
            deeper += 1
            gone = set(out)
            kept = [c for i, c in enumerate(before) if i not in gone]
            assert "".join(kept) == after, text[:80]
            for n, i in enumerate(out):  # (a backslash or a space, one of the four after it)
                assert before[i] in "\\ " and after[i - n : i - n + 1] in ("\\", " ", '"', "/")
        for pre in pres:
            assert len({pre.search(s) is None for s, _ in levels}) == 1, (pre.pattern, text[:80])
        differs += len({twin.search(s) is None for s, _ in levels}) > 1
        told: dict[Rule, bool] = {}
        valued, names = set(), set()
        for s, _ in levels:
            list(named.spans(s, told))
            valued.add(told[named])
            names.add(tuple(_names(named, s)))
        assert len(valued) == len(names) == 1, text[:80]
        read += valued == {True}
    assert deeper > 3000 and differs > 10 and 500 < read < 3500, (deeper, differs, read)
    r = _sealing.derived()
    sealed = [_sealing._spans(r, text) for text in texts]
    # (each level searched anew: the keywords as they were, no answers told)
    monkeypatch.setattr(Detector, "keywords", lambda self, text: frozenset(self._present(text)))
    unescaped = Detector.unescaped
    monkeypatch.setattr(Detector, "unescaped", lambda *a: frozenset(unescaped(*a)))
    assert [_sealing._spans(r, text) for text in texts] == sealed
    assert all(sealed[-7:]), sealed[-7:]
    assert sum(map(bool, sealed)) > 1000
