"""The inspector's widgets and screens are façades over private modules (issue 56): their exported
names are pinned here, so that a name added to or dropped from a surface is a decision seen in
review."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

EXPORTED = {
    "looptap.inspector.widgets": [
        "COST_COLOUR", "KEYS", "PARAMS_LIMIT", "SERIES",
        "ConversationSwitcher", "EmissionPane", "ErrorView", "FindingsTable", "FindingsView",
        "ForkPane", "ForkRead", "GrowthChart", "GrowthView", "KeyBar", "LayerPane", "MessagesView",
        "RunState", "RunStatus", "RunTabs", "Sidebar", "TurnList", "TurnPane",
        "client_sent", "conversation_label", "dollars", "key_line", "legend_text", "nice_ticks",
        "params_text", "read_fork", "short_finish", "token_label", "turn_line",
    ],
    "looptap.inspector.screens": ["HelpScreen", "MainScreen", "SearchScreen", "key_groups"],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EXPORTED))
def test_the_exported_names_are_pinned(name: str) -> None:
    package = importlib.import_module(name)
    assert package.__all__ == sorted(EXPORTED[name], key=lambda s: (not s.isupper(), s))


@pytest.mark.parametrize("name", sorted(EXPORTED))
def test_every_exported_name_resolves_and_every_module_is_private(name: str) -> None:
    package = importlib.import_module(name)
    for exported in package.__all__:
        assert getattr(package, exported) is not None, exported
    modules = [m.name for m in pkgutil.iter_modules(package.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"{name}.{m}")
