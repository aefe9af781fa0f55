"""A tnetstring encoder (mitmproxy's flow-file container), for crafting flow files in tests: the
reader under test (``cassettes.storage._mitmflow``) never sees this code."""

from __future__ import annotations

from typing import Any


def tnet(v: Any) -> bytes:
    """``v`` as a tnetstring: None, bool, int, float, bytes, str, lists/tuples and dicts."""
    if v is None:
        return b"0:~"
    if isinstance(v, bool):
        p, t = (b"true" if v else b"false"), b"!"
    elif isinstance(v, int):
        p, t = str(v).encode(), b"#"
    elif isinstance(v, float):
        p, t = repr(v).encode(), b"^"
    elif isinstance(v, bytes):
        p, t = v, b","
    elif isinstance(v, str):
        p, t = v.encode(), b";"
    elif isinstance(v, list | tuple):
        p, t = b"".join(tnet(x) for x in v), b"]"
    elif isinstance(v, dict):
        p, t = b"".join(tnet(k) + tnet(x) for k, x in v.items()), b"}"
    else:
        raise TypeError(v)
    return str(len(p)).encode() + b":" + p + t
