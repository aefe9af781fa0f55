"""docs/redaction.md's classes are generated from the redaction's rule data (issue 91, item 1):
the page says what the code does, and a rule changed without the page fails here."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))  # last: bench/mcp.py must never shadow the mcp package

from redaction_doc import MARKER, PAGE  # noqa: E402

from looptap.cassettes.recording._rules_doc import EXAMPLE_NAMES, doc_classes  # noqa: E402


def test_the_page_is_generated_from_the_rules() -> None:
    page = PAGE.read_text()
    assert MARKER in page, "run: python bench/redaction_doc.py"
    assert page.split(MARKER, 1)[1] == doc_classes(), "run: python bench/redaction_doc.py"


def test_every_example_name_has_its_row() -> None:
    page = PAGE.read_text()
    for name in EXAMPLE_NAMES:
        assert page.count(f"| `{name}` |") == 1, name
