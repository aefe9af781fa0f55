"""The proxy an environment names for a connection, read as curl, requests and Python's
``urllib`` read the variables: ``https_proxy``, else ``HTTPS_PROXY``, else
``all_proxy``/``ALL_PROXY`` for ``https`` (``http_proxy``… for ``http``), unless
``no_proxy``/``NO_PROXY`` names the host (:func:`bypassed`). The recorder forwards through it
(proxy/user_proxy.py), and so does every ``https`` request looptap sends live itself
(:class:`~._client.Upstream`: ``compare``, a replay server's direct calls)."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

__all__ = ["NO_PROXY_VARS", "PROXY_VARS", "bypassed", "env_proxy", "first_set"]

#: The variables each scheme's proxy is read from, in order.
PROXY_VARS = {
    "https": ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"),
    "http": ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"),
}
NO_PROXY_VARS = ("no_proxy", "NO_PROXY")


def first_set(environ: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    """The first of ``names`` set (not blank) in ``environ``, and its value."""
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


def bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``NO_PROXY``'s value names ``host:port`` (``host`` lower case, without brackets),
    as curl and requests read it: ``*``; a name, which covers its subdomains (a leading dot or
    not); an address, or a network (``10.0.0.0/8``) holding the host's address; any of these
    with ``:port`` for that port only. (Python's ``urllib`` has no public matcher, and its own
    knows no networks.)"""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in no_proxy.lower().split(","):
        entry = entry.strip()
        if entry == "*":
            return True
        one = entry.count(":") == 1 or entry.startswith("[")
        name, _, only = (
            entry.rpartition(":") if one and not entry.endswith("]") else (entry, "", "")
        )
        if only and only != str(port):
            continue
        name = name.strip("[]").lstrip(".")
        if not name:
            continue
        if address is not None:
            try:
                if address in ipaddress.ip_network(name, strict=False):
                    return True
            except ValueError:
                pass
            continue
        if host == name or host.endswith("." + name):
            return True
    return False


def env_proxy(scheme: str, host: str, port: int, environ: Mapping[str, str]) -> str | None:
    """The URL of the ``http(s)`` proxy ``environ`` names for a ``scheme`` connection to
    ``host:port`` (a value without a scheme read as ``http://``); ``None``: direct (none named,
    ``NO_PROXY`` names the host, or a proxy of another kind, such as SOCKS)."""
    found = first_set(environ, PROXY_VARS.get(scheme, ()))
    if found is None:
        return None
    no_proxy = first_set(environ, NO_PROXY_VARS)
    name = host.lower().rstrip(".").strip("[]")
    if no_proxy is not None and bypassed(name, port, no_proxy[1]):
        return None
    url = found[1] if "://" in found[1] else "http://" + found[1]
    return url if url.lower().startswith(("http://", "https://")) else None
