"""The README stays short and every link in it and in docs/ leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes."""
    out = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_resolve(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: {target} does not exist"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{page.name}: no heading #{anchor} in {dest.name}"


def test_readme_is_short() -> None:
    """What looptap is, the two set-up commands, one example per job, links (details in docs/)."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 90


def test_the_docs_index_links_every_page_and_the_readme_links_the_index() -> None:
    """Issue 54: 12 pages of docs/ could not be reached from the README (show-json.md, the schema
    the README advertises, from nowhere). docs/README.md links every page; the README links it."""
    docs = ROOT / "docs"
    index = docs / "README.md"
    linked = {(docs / t.partition("#")[0]).resolve() for t in LINK.findall(index.read_text())}
    pages = {p.resolve() for p in docs.glob("*.md")} - {index.resolve()}
    assert not pages - linked, sorted(p.name for p in pages - linked)
    assert "](docs/README.md)" in (ROOT / "README.md").read_text()
    # and so every page is reachable from the README
    seen, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        for t in LINK.findall(page.read_text()):
            dest = (page.parent / t.partition("#")[0]).resolve()
            if dest.suffix == ".md" and dest.exists() and dest not in seen:
                seen.add(dest)
                todo.append(dest)
    assert pages <= seen, sorted(p.name for p in pages - seen)
