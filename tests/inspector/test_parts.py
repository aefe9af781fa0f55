"""The inspector's parts (issue 56, item 3): no god class, no Protocol of the screen's internals.

The main screen composes widgets that own their concept and talk in Textual messages; none of
them reaches back into the screen, so none names it or states what it needs of it.
"""

from __future__ import annotations

import ast
from pathlib import Path

INSPECTOR = Path(__file__).resolve().parents[2] / "inspector"
#: The largest class the inspector may have (lines, its docstring included).
MOST_LINES = 400


def _modules() -> dict[str, ast.Module]:
    return {
        str(p.relative_to(INSPECTOR.parent)): ast.parse(p.read_text())
        for p in sorted(INSPECTOR.rglob("*.py"))
    }


def test_no_class_of_the_inspector_is_over_400_lines() -> None:
    big = [
        f"{name}:{node.name} ({(node.end_lineno or node.lineno) - node.lineno + 1} lines)"
        for name, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 > MOST_LINES
    ]
    assert big == []


def test_the_screens_parts_state_no_protocol_of_it() -> None:
    """A Protocol the screen satisfies, for a helper to call back into it, is a mixin in effect."""
    protocols = [
        f"{name}:{node.name}"
        for name, tree in _modules().items()
        if name.startswith(("inspector/screens/", "inspector/widgets/"))
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(getattr(b, "id", getattr(b, "attr", "")) == "Protocol" for b in node.bases)
    ]
    assert protocols == []


def test_only_the_app_names_the_main_screen() -> None:
    names = [
        name
        for name, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and any(alias.name == "MainScreen" for alias in node.names)
        and not name.startswith("inspector/screens/")
    ]
    assert names == ["inspector/app.py"]
