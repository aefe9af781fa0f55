"""What a recorder is asked for (:class:`RecorderConfig`) and the listeners that follow from it:
a port each, and the upstream each forwards to (a base-URL variable the user set, followed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..cassettes.net import free_port
from ..cassettes.providers import REVERSE_UPSTREAMS
from ..cassettes.replay.testing.ready import bare_url

if TYPE_CHECKING:
    from urllib.parse import SplitResult

__all__ = ["RECORDER_VAR", "Listener", "RecorderConfig", "RecorderError"]


class RecorderError(RuntimeError):
    """The recorder could not start (e.g. its cassette cannot be opened): one line for the user."""


@dataclass
class Listener:
    name: str
    upstream: str | None  # None: the forward proxy
    port: int
    env: tuple[str, ...] = ()
    suffix: str = ""
    #: What the start says about this listener's upstream (the user's base-URL variable followed
    #: or ignored); empty when it forwards to the built-in API or a ``--upstream``.
    note: str = ""

    @property
    def spec(self) -> str:
        return f"reverse:{self.upstream}@{self.port}" if self.upstream else f"regular@{self.port}"


@dataclass
class RecorderConfig:
    output: Path
    base_port: int = 0
    upstreams: dict[str, str] = field(default_factory=dict)
    record_hosts: tuple[str, ...] = ()
    #: Record the tools' HTTP (forward-proxy traffic to hosts that are not LLM APIs'), but on the
    #: hosts of ``tool_http_exclude`` (globs, or ``HOST:PORT``).
    tool_http: bool = True
    tool_http_exclude: tuple[str, ...] = ()
    #: Record tool servers on this machine too (the default): ``NO_PROXY`` then names only the
    #: recorder's own listeners, not loopback; a client that cannot leave out a port reaches a
    #: listener through the forward proxy, which lets it through (:mod:`proxy.tool_http`).
    tool_http_loopback: bool = True
    redact_headers: tuple[str, ...] = ()
    redact_patterns: tuple[str, ...] = ()
    ssl_insecure: bool = False
    confdir: Path = field(default_factory=lambda: Path("~/.mitmproxy").expanduser())
    host: str = "127.0.0.1"
    fsync: bool = False
    durable: bool = False
    #: ``--fault`` specs answered in the proxy (proxy/faults.py), and the seed of their ``p=``.
    faults: tuple[str, ...] = ()
    fault_seed: int = 0
    #: ``--ready-file``: where to write the ready file once listening
    #: (cassettes/replay/testing/_ready.py).
    ready_file: Path | None = None
    #: A fork's per-run key for its edit marks (``looptap run --from``; cassettes.wire._edit_marks):
    #: held in this process only, never in an option, a file or the child's environment.
    edit_key: str | None = field(default=None, repr=False)
    #: The environment the agent would get (``looptap run``/``record`` pass their own): a built-in
    #: listener without ``--upstream`` forwards where its base-URL variable there points
    #: (:func:`_follow`). Empty: the vendors' APIs.
    environ: dict[str, str] = field(default_factory=dict)
    #: The agent's name (``--agent``, else ``$LOOPTAP_AGENT``) and the command ``looptap run``
    #: runs: the cassette header's ``agent`` and ``command`` (cassettes.recording._about).
    agent: str | None = None
    command: tuple[str, ...] = ()
    #: ``looptap run``: what of the command's shell is recorded: ``"tree"`` (the default: the
    #: working tree per turn, no ptrace), ``"processes"`` (``LOOPTAP_SHELL_TRACE=processes``:
    #: also each program and its exit, traced with ptrace: proxy/shell_trace.py), ``"full"``
    #: (``--shell-trace``: each process's output and files too), ``""`` (``--no-shell-trace``).
    shell_trace: str = ""
    #: ``looptap run --copy-tree``: keep every file's start contents, not only the changed ones'.
    copy_tree: bool = False

    def listeners(self) -> list[Listener]:
        """One listener per upstream and the forward proxy, each on a port of its own."""
        out: list[Listener] = []
        names = list(REVERSE_UPSTREAMS) + [n for n in self.upstreams if n not in REVERSE_UPSTREAMS]
        port = self.base_port
        given: set[int] = set()

        def pick() -> int:
            got = port or free_port(given)
            given.add(got)
            return got

        for name in names:
            upstream, env, suffix = REVERSE_UPSTREAMS.get(
                name, ("", (f"{name.upper().replace('-', '_')}_BASE_URL",), "")
            )
            upstream = self.upstreams.get(name, upstream)
            out.append(Listener(name, upstream.rstrip("/"), pick(), env, suffix))
            port = port + 1 if port else 0
        out.append(Listener("forward", None, pick()))
        for lst in out:
            if lst.name in REVERSE_UPSTREAMS and lst.name not in self.upstreams:
                _follow(lst, self.environ, self.host, given)
        return out


#: Exported with the base URLs (``host:port,…`` of the recorder's listeners): a recorder finding
#: one of these in its own environment knows it was set by looptap (an enclosing run, or a stale
#: ``eval "$(looptap record)"``), not by the user, and does not forward to it.
RECORDER_VAR = "LOOPTAP_RECORDER"
_LOCAL = ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::")


def _follow(lst: Listener, environ: dict[str, str], host: str, own_ports: set[int]) -> None:
    """A base-URL variable the user already set for this listener's API (the first of its
    variables that is set) becomes its upstream, the URL's path the suffix the client gets
    (``http://127.0.0.1:8000/v1`` → upstream ``http://127.0.0.1:8000``, the client
    ``http://127.0.0.1:LISTENER/v1``), and ``lst.note`` says so. A URL of this recorder is ignored
    (following it would loop), and so is one of a recorder named in :data:`RECORDER_VAR` that no
    longer listens (a stale export); one that still listens (an enclosing ``looptap run``) is
    followed: the traffic is recorded there too and goes on where it forwards. Raises
    :class:`RecorderError` for a URL that cannot be an upstream: nothing is sent to the vendor
    instead."""
    var = next((v for v in lst.env if environ.get(v, "").strip()), None)
    if var is None:
        return
    value = environ[var].strip()
    shown = bare_url(value) or "(not a URL)"
    u, port = _upstream_url(value, var, shown, lst.name)
    assert u.hostname is not None
    hostname = u.hostname.lower()
    local = hostname in _LOCAL or hostname.startswith("127.") or hostname == host
    exported = {
        item.rsplit(":", 1)[-1] for item in environ.get(RECORDER_VAR, "").split(",") if ":" in item
    }
    via = ""
    if local and port in own_ports:
        lst.note = (
            f"{lst.name}: your {var} {shown} is this recorder itself: "
            f"not followed; the upstream is {lst.upstream}"
        )
        return
    if local and str(port) in exported:
        if not listening(u.hostname, port):  # an `eval "$(looptap record)"` since stopped
            lst.note = (
                f"{lst.name}: your {var} {shown} is a looptap recorder that is gone (a stale "
                f"export): not followed; the upstream is {lst.upstream}"
            )
            return
        via = ", a looptap recorder that is running (an enclosing run): recorded there too"
    netloc = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    lst.upstream = f"{u.scheme}://{netloc}" + (f":{u.port}" if u.port is not None else "")
    lst.suffix = u.path.rstrip("/")
    lst.note = (
        f"{lst.name}: your {var} {shown} is the upstream{via} (--upstream {lst.name}=URL overrides)"
    )


def _upstream_url(value: str, var: str, shown: str, name: str) -> tuple[SplitResult, int]:
    """``value`` (of the variable ``var``) split, and its port, when it can be listener ``name``'s
    upstream: http(s)://host[:port][/path], without user or query. Raises :class:`RecorderError`
    otherwise."""
    from urllib.parse import urlsplit

    try:
        u = urlsplit(value)
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        u, port = None, 0
    if (
        u is None
        or u.scheme not in ("http", "https")
        or not u.hostname
        or u.username
        or u.password
        or u.query
        or u.fragment
    ):
        raise RecorderError(
            f"your {var} {shown} cannot be {name}'s upstream (http(s)://host[:port][/path], "
            f"without user or query): give --upstream {name}=URL, or unset {var}"
        )
    return u, port


def listening(host: str, port: int) -> bool:
    """Whether something accepts connections at ``host:port`` (a loopback address: one connect,
    closed at once, nothing sent)."""
    import socket

    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False
