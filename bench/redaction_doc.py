"""Writes docs/redaction.md's classes (after its marker) from the redaction's rule data
(cassettes/recording/_rules_doc.py: ``doc_classes``); tests/cassettes/test_redaction_doc.py
checks the page is current.

    .venv/bin/python bench/redaction_doc.py
"""

from __future__ import annotations

from pathlib import Path

from looptap.cassettes.recording._rules_doc import doc_classes

PAGE = Path(__file__).resolve().parents[1] / "docs" / "redaction.md"
MARKER = "<!-- generated from cassettes/recording/_rules_doc.py by `python bench/redaction_doc.py` -->\n"  # noqa: E501


def main() -> None:
    text = PAGE.read_text()
    head = (
        text.split(MARKER, 1)[0] if MARKER in text else text.rstrip("\n") + "\n\n## The classes\n\n"
    )
    PAGE.write_text(head + MARKER + doc_classes())


if __name__ == "__main__":
    main()
