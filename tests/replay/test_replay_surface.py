"""cassettes.replay's packages hand no names on (issue 72, item 5): each caller imports the module
that defines a name, so a reader and a tool that follows imports see the route. The public modules
of each package are pinned here, so that a module made public or private is a decision seen in
review; a package's ``__init__`` is its docstring alone."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

PUBLIC = {
    "looptap.cassettes.replay": ["command", "comparison"],
    "looptap.cassettes.replay.forking": [
        "cursor", "divergence", "fork", "forkview", "limit", "placement", "plan", "proposal",
        "repeat", "rundiff", "served",
    ],
    "looptap.cassettes.replay.forking.compare": ["answer", "budget", "report", "sending"],
    "looptap.cassettes.replay.live": [
        "chains", "continuation", "edits", "model", "rewrite", "upstreams",
    ],
    "looptap.cassettes.replay.serving": ["agent_env", "faults", "plan", "server"],
    "looptap.cassettes.replay.testing": ["plugin", "ready", "recorder"],
}  # fmt: skip


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_the_public_modules_are_pinned_and_the_package_hands_nothing_on(package: str) -> None:
    pkg = importlib.import_module(package)
    found = sorted(
        m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.ispkg and m.name[0] != "_"
    )
    assert found == PUBLIC[package]
    for m in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{package}.{m.name}")
    tree = ast.parse(Path(pkg.__file__ or "").read_text(encoding="utf-8"))
    assert [type(n).__name__ for n in tree.body] == ["Expr"], "a docstring alone"
