"""cassettes.net, the one network layer: its façade pinned (private modules behind one
``__all__``), and its names loaded on first use."""

from __future__ import annotations

import sys

import looptap.cassettes.net as net
from tests.support import progress

EXPORTED = [
    "CLOSE",
    "FRAME_COST",
    "HOP_BY_HOP",
    "MAX_BODY",
    "MAX_MESSAGE",
    "NODE_SHIM",
    "NO_PROXY_VARS",
    "PING",
    "PONG",
    "PROXY_VARS",
    "READ_TIMEOUT",
    "TEXT",
    "Answer",
    "BackgroundServer",
    "BadRequest",
    "Handler",
    "LiveSocket",
    "MessageReader",
    "Request",
    "Trust",
    "Upstream",
    "UpstreamError",
    "UpstreamResponse",
    "WsProtocolError",
    "accept_key",
    "bypassed",
    "env_proxy",
    "first_set",
    "frame",
    "free_port",
    "header_problem",
    "node_options",
    "read_request",
    "recorded_request_headers",
    "refuse",
    "said_name",
    "shim_left_out",
]


def test_the_facade_exports_these_names_and_each_loads() -> None:
    assert net.__all__ == EXPORTED
    for name in net.__all__:
        assert getattr(net, name) is not None, name


def test_a_port_costs_no_http_client() -> None:
    """The recorder's launcher takes ``free_port`` from here: no HTTP or WebSocket library, no
    cassette code beyond the layer, is loaded for it."""
    code = (
        "import sys; from looptap.cassettes.net import free_port; free_port(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('h11', 'wsproto', 'httpx2', 'httpcore2', 'pydantic') or m.startswith('looptap.cassettes')))"  # noqa: E501
    )
    out = progress.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert (
        out
        == "['looptap.cassettes', 'looptap.cassettes.lazy', 'looptap.cassettes.net', 'looptap.cassettes.net._serve']"  # noqa: E501
    ), out
