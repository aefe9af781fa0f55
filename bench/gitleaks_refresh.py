"""Regenerate :mod:`cassettes.recording._gitleaks_rules` from gitleaks' maintained ruleset.

    python bench/gitleaks_refresh.py                  # fetch the latest release's config
    python bench/gitleaks_refresh.py --source FILE    # from a local gitleaks.toml

gitleaks (https://github.com/gitleaks/gitleaks, MIT) keeps ~200 credential rules, each a regular
expression with the keywords one of which any match contains, an entropy floor and allowlists.
This script translates each rule to Python's ``re`` dialect (Go's mid-pattern ``(?i)`` becomes a
scoped ``(?i:…)``, ``\\z`` becomes ``\\Z``, and the closing delimiter group
``(?:[\\x60'"\\s;]|\\\\[nr]|$)`` becomes "not followed by a letter or digit", so a key ending a
sentence or a JSON string counts too), checks that it compiles, and writes the rules as Python data
with the licence and the source's version. Rules that cannot be translated are listed and left out;
``generic-api-key`` (any ``key = value`` with an entropy floor) is left out on purpose: the
redactor's field-name net covers that shape in structured data, and in free text it masks ordinary
prose.

Run by a maintainer (it needs the network); the result is committed, never fetched at run time,
and this script is no part of the package (as ``bench/unicode_unsafe.py``, the sanitiser's).
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
import urllib.request
import warnings
from pathlib import Path

URL = "https://raw.githubusercontent.com/gitleaks/gitleaks/{ref}/config/gitleaks.toml"
LICENSE_URL = "https://raw.githubusercontent.com/gitleaks/gitleaks/{ref}/LICENSE"
OUT = Path(__file__).resolve().parents[1] / "cassettes" / "recording" / "_gitleaks_rules.py"
#: Left out on purpose (see the module's docstring).
SKIP = {"generic-api-key"}
_LEFT = r"[\w.-]{0,50}?"
_DELIM = (r"""(?:[\x60'"\s;]|\\[nr]|$|\b)""", r"""(?:[\x60'"\s;]|\\[nr]|$)""")


def _scope_flags(rx: str) -> str:
    """Go allows ``(?i)`` anywhere (it applies to the end of the enclosing group); Python only at
    the start. Rewrite each later one as ``(?i:`` closed where its group closes."""
    out: list[str] = []
    closers: list[int] = []  # per open group: how many scoped groups to close with it
    i = 0
    while i < len(rx):
        c = rx[i]
        if c == "\\":
            out.append(rx[i : i + 2])
            i += 2
            continue
        if c == "[":  # a class: copied whole (brackets inside are literal)
            j = i + 1
            if j < len(rx) and rx[j] == "^":
                j += 1
            if j < len(rx) and rx[j] == "]":
                j += 1
            while j < len(rx) and rx[j] != "]":
                j += 2 if rx[j] == "\\" else 1
            out.append(rx[i : j + 1])
            i = j + 1
            continue
        m = re.match(r"\(\?([imsU-]+)\)", rx[i:])
        if m and i > 0:
            out.append(f"(?{m.group(1)}:")
            if closers:
                closers[-1] += 1
            else:
                closers.append(1)
                closers.insert(0, 0)
            i += m.end()
            continue
        if c == "(":
            closers.append(0)
        elif c == ")" and closers:
            out.append(")" * closers.pop())
        out.append(c)
        i += 1
    out.append(")" * sum(closers))
    return "".join(out)


def translate(rx: str) -> str:
    # The left context of the keyword-context rules ("[\\w.-]{0,50}?" before the service's name)
    # only widens the match, never the secret; tried at every position it cost 1.5 s on 244 KB.
    while True:  # at the start, possibly inside a case-insensitive group
        m = re.match(r"(\(\?i\)|\(\?i:)?" + re.escape(_LEFT), rx)
        if m is None:
            m = re.match(re.escape(_LEFT) + r"(\(\?i:)" + re.escape(_LEFT), rx)
            if m is None:
                break
            rx = m.group(1) + rx[m.end() :]
            continue
        rx = (m.group(1) or "") + rx[m.end() :]
    for d in _DELIM:
        if rx.endswith(d):
            rx = rx[: -len(d)] + "(?![A-Za-z0-9])"
    rx = rx.replace(r"\z", r"\Z")
    return _scope_flags(rx)


def build(doc: dict[str, object], version: str, licence: str) -> tuple[str, list[str]]:
    rows: list[str] = []
    dropped: list[str] = []
    rules = doc.get("rules")
    assert isinstance(rules, list)
    for r in rules:
        rid, rx = r.get("id"), r.get("regex")
        if rid in SKIP or not isinstance(rx, str):
            dropped.append(
                f"{rid}: {'left out on purpose' if rid in SKIP else 'no regex (a path rule)'}"
            )
            continue
        py = translate(rx)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                re.compile(py)
        except re.error as exc:
            dropped.append(f"{rid}: does not translate ({exc})")
            continue
        allow: list[str] = []
        stop: list[str] = []
        for a in r.get("allowlists", []):
            if a.get("condition") or a.get("regexTarget") not in (None, "secret") or a.get("paths"):
                continue  # only allowlists about the secret itself apply to a stream of text
            allow += a.get("regexes", [])
            stop += a.get("stopwords", [])
        rows.append(
            f"    ({rid!r}, {py!r}, {tuple(k.lower() for k in r.get('keywords', []))!r}, "
            f"{float(r.get('entropy', 0.0))!r}, {int(r.get('secretGroup', 0))!r}, "
            f"{tuple(allow)!r}, {tuple(stop)!r}),"
        )
    notice = "\n".join(f"# {line}".rstrip() for line in licence.strip().splitlines())
    text = (
        f'"""Credential rules of gitleaks ({version}), translated to Python by\n'
        "``bench/gitleaks_refresh.py`` (do not edit by hand: run it again).\n\n"
        "Each rule: (id, regex, keywords one of which a match contains (lower case), entropy floor "
        "of the\n"
        "secret, its capture group (0: the first that matched), allowlist regexes, "
        'stopwords)."""\n\n'
        f"# gitleaks' licence, which covers the rules below:\n#\n{notice}\n\n"
        f"SOURCE = {version!r}\n\n"
        "RULES: tuple[tuple[str, str, tuple[str, ...], float, "
        "int, tuple[str, ...], tuple[str, ...]], ...] = (\n" + "\n".join(rows) + "\n)\n"
    )
    return text, dropped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/gitleaks_refresh.py")
    ap.add_argument("--source", help="a local gitleaks.toml (default: fetch --ref from GitHub)")
    ap.add_argument("--license", help="a local copy of gitleaks' LICENSE (default: fetched)")
    ap.add_argument(
        "--ref", default="master", help="the gitleaks tag or commit to fetch (default: master)"
    )
    ap.add_argument(
        "--version", help="what to record as the source (default: the --ref, or the file)"
    )
    args = ap.parse_args(argv)
    if args.source:
        raw = Path(args.source).read_bytes()
    else:
        with urllib.request.urlopen(URL.format(ref=args.ref), timeout=60) as resp:
            raw = resp.read()
    if args.license:
        licence = Path(args.license).read_text("utf-8")
    else:
        with urllib.request.urlopen(LICENSE_URL.format(ref=args.ref), timeout=60) as resp:
            licence = resp.read().decode("utf-8")
    version = args.version or (
        f"gitleaks {args.ref}" if not args.source else f"gitleaks config {args.source}"
    )
    text, dropped = build(tomllib.loads(raw.decode("utf-8")), version, licence)
    OUT.write_text(text, "utf-8")
    print(f"wrote {OUT}; left out {len(dropped)}:", file=sys.stderr)
    for d in dropped:
        print(f"  {d}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
