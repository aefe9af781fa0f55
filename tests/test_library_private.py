"""No library's private name (issue 56, item 5): ``bench/surface.py`` lists each use of another
library's internals in the shipped packages. The ones left have no public API to go through; each
is guarded by the library's version where it is used and tested there. A new one fails here until
it is judged and listed."""

from __future__ import annotations

from bench import surface
from tests.support.source import collector_paused

ALLOWED = {
    # a library's package registered with its __init__ deferred to its first own name read:
    # genai-prices' (the network updater, cassettes/analysis/_price_data.py) and mitmproxy.addons'
    # (its 31 default addons, proxy/cli.py); tests/test_startup_imports.py
    ("cassettes/lazy.py", "sys.modules[...] replaced"),
    # mitmproxy's connection handlers and its HTTP/1 layer: the releases of http1_fixes.CHECKED
    ("proxy/failures.py", "proxyserver.connections"),
    ("proxy/http1_fixes.py", "from h11._readers import ChunkedReader"),
    ("proxy/http1_fixes.py", "from mitmproxy.proxy.layers.http import _http1"),
    # re-exported by mitmproxy.proxy.layers.http too, but not explicitly (no __all__: mypy --strict
    # refuses them there)
    ("proxy/http1_fixes.py", "from mitmproxy.proxy.layers.http._base import ReceiveHttp"),
    ("proxy/http1_fixes.py", "from mitmproxy.proxy.layers.http._events import ResponseHeaders"),
    # mitmproxy's upstream-proxy tunnel (what its upstream mode puts under a CONNECT): a connection
    # passed through untouched goes through the user's proxy (proxy/trust.py, said where missing;
    # tests/proxy/test_e2e_user_network.py)
    ("proxy/trust.py", "from mitmproxy.proxy.layers.http._upstream_proxy import HttpUpstreamProxy"),
    # not a use: the YAML tags vcrpy's aiohttp stub writes on header names, read as the strings
    # they wrap (nothing imported or constructed; tests/cassettes/providers/test_wild_recordings)
    ("cassettes/storage/_vcr.py", "'multidict._multidict.istr'"),
    ("cassettes/storage/_vcr.py", "'multidict._multidict_py.istr'"),
}


def test_only_the_listed_library_internals_are_used() -> None:
    """``bench/surface.py``'s list of them, made in this process with the collector paused while
    the packages are parsed and walked (tests/support/source.py)."""
    with collector_paused():
        listed = surface.Surface(surface.files()).library_private()
    found = {
        (where.split(":")[0], what) for where, _, what in (line.partition("  ") for line in listed)
    }
    assert found == ALLOWED
