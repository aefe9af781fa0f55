"""Node's built-in ``fetch`` through the proxy variables: a ``--require`` shim
(``node_env_proxy.cjs`` beside this file, package data) that ``looptap run`` and the replay side
(``looptap replay``'s export lines, the pytest plugin) put into ``NODE_OPTIONS``. Node before 22.21
(and 23) reads no ``HTTP(S)_PROXY`` for ``fetch`` (``NODE_USE_ENV_PROXY`` is newer): without it a
Node agent's tools would send their calls past the recorder, or past the replay server to the real
network. On a Node that honours ``NODE_USE_ENV_PROXY`` the shim does nothing."""

from __future__ import annotations

from pathlib import Path

__all__ = ["NODE_SHIM", "node_options", "shim_left_out"]

#: The shim (docs/recorder.md, "Node").
NODE_SHIM = Path(__file__).with_name("node_env_proxy.cjs")


def node_options(given: str, shim: Path = NODE_SHIM) -> str | None:
    """``NODE_OPTIONS`` with ``shim`` required after what the user gave (``given``, kept as it
    is), the path in double quotes when it has a space (Node splits ``NODE_OPTIONS`` on spaces
    and reads double quotes); ``given`` itself when it already requires the shim (a replay inside
    ``looptap run``, an export evaluated twice); ``None`` (left as given) for a path Node's
    quoting cannot carry (a double quote, a backslash) or a control character in either."""
    path = str(shim)
    if '"' in path or "\\" in path or any(ord(c) < 32 or ord(c) == 127 for c in path + given):
        return None
    token = f'--require="{path}"' if any(c.isspace() for c in path) else f"--require={path}"
    if token in given.split(" ") or (" " in path and token in given):
        return given
    return f"{given} {token}".strip()


def shim_left_out(given: str, past: str, shim: Path = NODE_SHIM) -> str | None:
    """What to say when :func:`node_options` leaves ``NODE_OPTIONS`` as given (the shim not
    added): why, and what it costs (a Node agent's ``fetch`` goes ``past`` looptap: "the
    recorder", "the replay server"); ``None`` when the shim is added or there already."""
    if node_options(given, shim) is not None:
        return None
    path = str(shim)
    why = (
        "your NODE_OPTIONS holds a control character (a newline, a tab …)"
        if any(ord(c) < 32 or ord(c) == 127 for c in given)
        else f"the shim's path {path!r} cannot be written into NODE_OPTIONS"
    )
    return (
        f"NODE_OPTIONS not extended: {why}, so looptap's --require shim (which puts Node's "
        "built-in fetch through HTTP(S)_PROXY before Node 22.21) is not added: a Node agent's "
        f"fetch calls go past {past}, unseen (NODE_USE_ENV_PROXY=1 does it on Node 22.21 and 24)"
    )
