"""No import circle inside cassettes/providers (issue 92): the registry of adapters is a module of
its own (``_registry``), below the package's façade and the modules that rebuild imported calls,
which asked the façade for it and were imported by it (``_rebuild_shape._shaped`` → the
registry, ``_rebuild`` → ``providers.by_family``, ``_profile`` → ``OTEL_PROVIDER_HOSTS``); what
rebuilds a trace's call is data (``Call``, the shapes) below what picks its family. Import-time
and type-checking imports alike (grimp counts both): 15 circles on 21bc15ea, 0 now."""

from __future__ import annotations

import itertools

import grimp


def test_no_two_modules_of_providers_import_each_other() -> None:
    graph = grimp.build_graph("looptap")
    mods = sorted(m for m in graph.modules if m.startswith("looptap.cassettes.providers"))
    circles = [
        (a, b)
        for a, b in itertools.combinations(mods, 2)
        if graph.chain_exists(a, b) and graph.chain_exists(b, a)
    ]
    assert circles == []
