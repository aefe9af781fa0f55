"""The README's figures for its test command are measured ones (issue 105, item 4): the minutes it
states for the core's result and the full result stay within 25% of the latest fresh-clone
measurement in docs/suite.md (the first row of its table of measurements). A new measurement
written there and a README left saying the old one fails here, and so does a README figure that
names no measurement (the README said "the first test result about 8 minutes after the start"
while the last fresh clone gave the core's result at 17)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "<!-- suite-figures:"
#: The README's words for each figure (the name is also the column of docs/suite.md's table).
SAID = {
    "the core's result": r"the core's result about (\d+(?:\.\d+)?) minutes after the start",
    "the full result": r"the full result about (\d+(?:\.\d+)?) minutes after the start",
}
TOLERANCE = 0.25


def latest(suite_md: str) -> dict[str, float]:
    """The first row of the table after the marker in docs/suite.md: {column: minutes}."""
    assert MARK in suite_md, "docs/suite.md has no table of fresh-clone measurements"
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in suite_md.split(MARK, 1)[1].splitlines()[1:]
        if line.startswith("|")
    ]
    head, row = rows[0], rows[2]  # (rows[1] is the rule under the head)
    out = {}
    for column in SAID:
        cell = row[head.index(column)]
        minutes = re.match(r"\**(\d+(?:\.\d+)?) min", cell)
        assert minutes, (column, cell)
        out[column] = float(minutes.group(1))
    return out


def problems(readme: str, suite_md: str) -> list[str]:
    """What the README states that is not docs/suite.md's latest measurement (within 25%)."""
    measured = latest(suite_md)
    out = []
    for name, pattern in SAID.items():
        found = [float(m) for m in re.findall(pattern, readme)]
        if len(found) != 1:
            out.append(f"the README states {name} {len(found)} times (once, in minutes: {pattern})")
        elif abs(found[0] - measured[name]) > TOLERANCE * measured[name]:
            out.append(
                f"the README says {name} about {found[0]:g} minutes after the start; "
                f"docs/suite.md's latest fresh-clone measurement is {measured[name]:g}"
            )
    return out


def _texts() -> tuple[str, str]:
    return (
        (ROOT / "README.md").read_text(encoding="utf-8"),
        (ROOT / "docs" / "suite.md").read_text(encoding="utf-8"),
    )


def test_the_readme_states_the_latest_measurement() -> None:
    assert problems(*_texts()) == []


def test_a_stale_or_missing_figure_is_caught() -> None:
    """The check on changed copies of both files: a README figure 30% off the measurement is
    caught, one 20% off is not; a new measurement 50% above the README's is caught; a README that
    drops a figure, or states it twice, is caught."""
    readme, suite_md = _texts()
    core = latest(suite_md)["the core's result"]
    said = re.compile(SAID["the core's result"])

    def with_core(minutes: float) -> str:
        return said.sub(f"the core's result about {minutes:g} minutes after the start", readme)

    assert len(problems(with_core(round(core * 1.3, 1)), suite_md)) == 1
    assert problems(with_core(round(core * 1.2, 1)), suite_md) == []
    row = suite_md.split(MARK, 1)[1].splitlines()
    first = next(i for i, line in enumerate(row) if line.startswith("|")) + 2
    newer = row[first].replace(f"{core:g} min", f"{core * 1.5:g} min", 1)
    assert newer != row[first]
    moved = suite_md.replace(row[first], newer, 1)
    assert [p for p in problems(readme, moved) if "the core's result" in p]
    assert problems(said.sub("the first test result about 8 minutes", readme), suite_md)
    twice = readme + "\n" + said.search(readme).group(0)  # type: ignore[union-attr]
    assert problems(twice, suite_md)


NIGHTLY = "<!-- nightly:"


def nightly_modules(suite_md: str) -> set[str]:
    """The modules named in the first column of docs/suite.md's table of the nightly run."""
    assert NIGHTLY in suite_md, "docs/suite.md has no table of the nightly run"
    table = suite_md.split(NIGHTLY, 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^\| `(tests/[^`]+\.py)` \|", table, re.M))


def slow_modules() -> set[str]:
    """The test modules that keep something for ``LOOPTAP_SLOW=1``: a ``slow`` mark, the flag, a
    corpus walk whose every file is the nightly run's (``real_corpus.cover_or_every``), or a run
    recorded live only at night (``recorder.recorded_or_live``)."""
    found = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        text = path.read_text(encoding="utf-8")
        marks = ("mark.slow", "LOOPTAP_SLOW", "@cover_or_every(", "recorded_or_live(")
        if any(m in text for m in marks):
            found.add(path.relative_to(ROOT).as_posix())
    return found


def test_every_module_with_a_nightly_part_is_listed_with_why() -> None:
    # (issue 105, item 2: what must stay slow goes behind LOOPTAP_SLOW=1 "with a nightly-style
    # entry in docs/suite.md"; a module that moves a test there and says nothing fails here)
    listed = nightly_modules(_texts()[1])
    found = slow_modules() - {"tests/test_suite_figures.py"}
    assert found - listed == set(), "not in docs/suite.md's nightly table"
    assert listed - found == set(), "in docs/suite.md's nightly table, with nothing nightly"


def test_an_unlisted_nightly_module_is_caught() -> None:
    table = (
        "x\n" + NIGHTLY + " -->\n| module | a | b |\n|---|---|---|\n"
        "| `tests/a/test_x.py` | y | z |\n"
    )
    assert nightly_modules(table) == {"tests/a/test_x.py"}
    assert nightly_modules(table.replace("test_x", "test_y")) != {"tests/a/test_x.py"}
