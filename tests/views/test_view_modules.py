"""``show``'s text views are three modules along their concepts (issue 56): a round trip's lines and
JSON additions (``view``), the layer analysis as text (``layers``), a fork's edits and an
import's provenance as shown (``edits``). Their exported names are pinned here, each defined in
one of them only, so that a name moving or added is a decision seen in review."""

from __future__ import annotations

import importlib

import pytest

EXPORTED = {
    "view": [
        "LINK_MEANINGS", "count", "error_phrase", "finding_json", "link_text", "mcp_link_json",
        "status_text", "summary_lines", "turn_json",
    ],
    "layers": [
        "SEVERITY_MARK", "GrowthRows", "analysis_lines", "caused_by_note", "finding_line",
        "growth_row",
    ],
    "edits": [
        "CONTINUED",
        "edit_text",
        "edited_messages",
        "edits_json",
        "reconstructed_said",
        "user_messages",
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EXPORTED))
def test_the_exported_names_are_pinned_and_defined_in_one_module(name: str) -> None:
    module = importlib.import_module(f"cassettes.views.{name}")
    assert module.__all__ == EXPORTED[name]
    others = {
        n for other, names in EXPORTED.items() if other != name for n in names if n != "count"
    }
    for n in module.__all__:
        assert getattr(module, n) is not None, n
        assert n not in others, f"{n} is exported by two view modules"
    # what moved out of view is not reachable through it again (one home per name)
    if name != "view":
        view = importlib.import_module("cassettes.views.view")
        leaked = [n for n in module.__all__ if n in view.__all__]
        assert not leaked, leaked
