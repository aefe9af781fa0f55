"""looptap's Node shim (cassettes/net/node_env_proxy.cjs, loaded with ``NODE_OPTIONS=--require``
by ``looptap run`` and the replay side) on the Node here, against loopback servers of ours: Node
20's built-in ``fetch`` ignores ``HTTP(S)_PROXY``; with the shim a plain-HTTP request goes to the
proxy in absolute form, and one to a host ``NO_PROXY`` names goes direct (each form of entry); the
replay's export lines, evaluated by a shell, load it from a path with a space after the user's
own ``NODE_OPTIONS``. The recorder end to end: tests/proxy/test_e2e_tool_http.py (the AI SDK
agent's plain ``fetch`` tools recorded) and tests/proxy/test_e2e_node_agents.py (HTTPS through the
``CONNECT`` tunnel); the replay side: tests/proxy/test_e2e_node_fetch_replay.py."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.net import NODE_SHIM, node_options
from looptap.cassettes.replay.serving.agent_env import export_lines, read_export, tool_proxy_env

NODE = shutil.which("node")

FETCH = """
fetch(process.env.TARGET + "/x").then(r => r.text()).then(t => console.log(t))
  .catch(e => { console.log("error", String(e.cause ?? e)); process.exit(1); });
"""


class _Server:
    """Answers every request with what it saw as the request line's target."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                outer.seen.append(self.path)
                body = self.path.encode()
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers() -> Iterator[tuple[_Server, _Server]]:
    proxy, target = _Server(), _Server()
    yield proxy, target
    proxy.close()
    target.close()


def _fetch(target: _Server, proxy: _Server, no_proxy: str, shim: bool = True) -> str:
    assert NODE is not None
    env = {"PATH": "/usr/bin:/bin", "TARGET": f"http://127.0.0.1:{target.port}",
           "HTTP_PROXY": f"http://127.0.0.1:{proxy.port}", "NO_PROXY": no_proxy}  # fmt: skip
    if shim:
        env["NODE_OPTIONS"] = node_options("") or ""
    done = subprocess.run(
        [NODE, "-e", FETCH], env=env, capture_output=True, text=True, timeout=120
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


@pytest.mark.skipif(NODE is None, reason="no node")
def test_plain_fetch_goes_to_the_proxy_in_absolute_form(servers: tuple[_Server, _Server]) -> None:
    proxy, target = servers
    url = f"http://127.0.0.1:{target.port}/x"
    assert _fetch(target, proxy, "") == url and proxy.seen == [url] and target.seen == []
    # without the shim (Node 20) or with NODE_USE_ENV_PROXY (22.21, 24) the same request: the
    # shim leaves a Node that honours the variables itself alone
    assert NODE is not None
    version = subprocess.run([NODE, "--version"], capture_output=True, text=True).stdout
    major, minor = (int(x) for x in version.strip().lstrip("v").split(".")[:2])
    if major < 22 or (major == 22 and minor < 21) or major == 23:
        _fetch(target, proxy, "", shim=False)
        assert target.seen == ["/x"]  # straight to the target: what the shim is for


@pytest.mark.skipif(NODE is None, reason="no node")
@pytest.mark.parametrize(
    "entry",
    ["127.0.0.1", "127.0.0.1:{port}", "http://127.0.0.1:{port}", "*", "localhost,127.0.0.1"],
)
def test_no_proxy_entries_go_direct(servers: tuple[_Server, _Server], entry: str) -> None:
    proxy, target = servers
    assert _fetch(target, proxy, entry.format(port=target.port)) == "/x"
    assert proxy.seen == [] and target.seen == ["/x"]


@pytest.mark.skipif(NODE is None, reason="no node")
def test_a_no_proxy_entry_for_another_port_does_not(servers: tuple[_Server, _Server]) -> None:
    proxy, target = servers
    _fetch(target, proxy, f"127.0.0.1:{target.port + 1 if target.port < 65535 else 1}")
    assert len(proxy.seen) == 1 and target.seen == []


def test_node_options_keeps_the_users_and_quotes_a_path_with_a_space() -> None:
    assert node_options("") == f"--require={NODE_SHIM}"
    assert node_options("--max-old-space-size=100") == (
        f"--max-old-space-size=100 --require={NODE_SHIM}"
    )
    assert NODE_SHIM.is_file()


def test_node_options_once_and_never_with_a_control_character(tmp_path: Path) -> None:
    once = node_options("--max-old-space-size=100")
    assert once is not None and node_options(once) == once  # an export evaluated twice
    spaced = tmp_path / "a dir" / "node_env_proxy.cjs"
    twice = node_options(node_options("", spaced) or "", spaced)
    assert twice == f'--require="{spaced}"'
    assert node_options("--x\n--y") is None  # left as the user gave it
    assert node_options("", tmp_path / 'a"b' / "x.cjs") is None


def test_export_lines_are_shell_words_and_carry_no_control_character() -> None:
    env = {"A": "plain", "B": "two words", "C": "it's $(touch x) `y`", "D": "a\nb", "E": "\x1b[2J"}
    lines, left = export_lines({**env, "not a name": "x"})
    assert left == ["D", "E", "(a variable with an unusable name)"]
    assert lines[0] == "export A=plain" and len(lines) == 3
    assert [read_export(line) for line in lines] == [(k, env[k]) for k in "ABC"]
    # as a POSIX shell reads them: each value one word, nothing run
    shown = subprocess.run(
        ["/bin/sh", "-c", 'eval "$LINES"; printf "%s|" "$A" "$B" "$C"'],
        env={"PATH": "/usr/bin:/bin", "LINES": "\n".join(lines)},
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert shown == "plain|two words|it's $(touch x) `y`|"
    assert read_export("export X=$(id)") == ("X", "$(id)") and read_export("echo x") is None


@pytest.mark.skipif(NODE is None, reason="no node")
def test_export_lines_load_the_shim_from_a_path_with_a_space(
    servers: tuple[_Server, _Server], tmp_path: Path
) -> None:
    """``looptap replay``'s lines (:func:`tool_proxy_env`) after a ``NODE_OPTIONS`` of the
    user's, evaluated by a shell: Node starts with both, and its ``fetch`` goes to the proxy."""
    proxy, target = servers
    spaced = tmp_path / "a dir" / "node_env_proxy.cjs"
    spaced.parent.mkdir()
    shutil.copy(NODE_SHIM, spaced)
    users = '--title="an agent" --max-old-space-size=300'
    tool = [f"127.0.0.1:{target.port}"]  # (a loopback tool: the loopback not left out)
    env = tool_proxy_env(f"http://127.0.0.1:{proxy.port}", tool, "", users)
    env["NODE_OPTIONS"] = node_options(users, spaced) or ""
    assert env["NODE_OPTIONS"] == f'{users} --require="{spaced}"'
    lines, left = export_lines(env)
    assert not left
    assert NODE is not None
    done = subprocess.run(
        ["/bin/sh", "-c", 'eval "$LINES" && exec "$NODE" -e "$FETCH"'],
        env={"PATH": "/usr/bin:/bin", "LINES": "\n".join(lines), "NODE": NODE, "FETCH": FETCH,
             "TARGET": f"http://127.0.0.1:{target.port}"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    url = f"http://127.0.0.1:{target.port}/x"
    assert done.stdout.strip() == url and proxy.seen == [url] and target.seen == []
