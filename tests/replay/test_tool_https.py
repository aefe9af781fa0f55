"""HTTPS tool calls served back (issue 84, item 4): a recording whose tools called a host over
HTTPS is served through the replay server as the agent's HTTPS proxy: ``CONNECT`` to that host,
TLS with a certificate of a CA made for this replay (its key never written), the tunnel's requests
matched as the plain-HTTP tools' are. httpx and requests (real clients, as the agents use them)
verify the certificate against the store :meth:`ReplayServer.trust_env` names.

The CA's files live in a private temp directory removed when the server stops; the host a
tunnel's requests are matched by is the recorded one (not the client's ``Host`` or SNI); a host
name from the cassette that no certificate may carry is left out.
"""

from __future__ import annotations

import os
import ssl
import stat
import time
from pathlib import Path

import pytest

from looptap.cassettes.replay.serving._tls import cert_name
from looptap.cassettes.replay.serving.server import ReplayServer
from tests.cassettes.test_tool_http import chat, echoed, tool
from tests.replay.conftest import write

httpx = pytest.importorskip("httpx")

WEATHER = "https://tools.example.com/weather?city=Paris"
GOT = b'{"city": "Paris", "temp_c": 15, "sky": "clear"}'


def _run(tmp_path: Path, url: str = WEATHER) -> Path:
    calls = [("call_1", "get_weather", {"city": "Paris"})]
    return write(
        tmp_path / "run.jsonl",
        [
            chat([{"role": "user", "content": "Weather in Paris?"}], calls),
            tool("GET", url, 200, GOT),
            chat(echoed(calls, [GOT.decode()]), [], "Clear in Paris."),
        ],
    )


def _client(server: ReplayServer, **kw: object) -> httpx.Client:
    """An httpx client as an agent's tool makes one: through the proxy, trusting the store the
    replay names (and nothing else: no environment read)."""
    env = server.trust_env({}, base=os.devnull)
    ctx = ssl.create_default_context(cafile=env["SSL_CERT_FILE"])
    return httpx.Client(proxy=server.url, verify=ctx, trust_env=False, **kw)  # type: ignore[arg-type]


def test_an_https_tool_call_is_served_through_connect(tmp_path: Path) -> None:
    with ReplayServer(_run(tmp_path)) as server:
        assert server.https_tool_hosts() == ["tools.example.com:443"]
        tls = server.tls
        assert tls is not None
        with _client(server) as client:
            got = client.get(WEATHER)
        assert (got.status_code, got.content) == (200, GOT)
        assert got.http_version == "HTTP/1.1"
        assert not server.misses
        # the private directory: 0700, and no key in it (the leaf's, loaded, is removed: issue 91)
        assert stat.S_IMODE(tls.dir.stat().st_mode) == 0o700
        keys = [p for p in tls.dir.iterdir() if b"PRIVATE KEY" in p.read_bytes()]
        assert keys == []
        assert not tls.dir.is_relative_to(tmp_path)
    assert server.tls is None and not tls.dir.exists()  # removed when it stopped
    assert "served 1 of 1 tool HTTP call" in server.report_lines()[0]


def test_requests_through_the_proxy_with_the_trust_variables(tmp_path: Path) -> None:
    """requests (as LangChain's and CrewAI's tools use it) reads HTTPS_PROXY and
    REQUESTS_CA_BUNDLE from the environment the replay exported."""
    requests = pytest.importorskip("requests")
    with ReplayServer(_run(tmp_path)) as server:
        env = {**server.proxy_env({}), **server.trust_env({}, base=os.devnull)}
        session = requests.Session()
        session.proxies = {"https": env["HTTPS_PROXY"]}
        got = session.get(WEATHER, verify=env["REQUESTS_CA_BUNDLE"], timeout=60)
        assert (got.status_code, got.content) == (200, GOT)


def test_a_tool_request_the_run_does_not_answer_is_a_miss_named_with_its_call(
    tmp_path: Path,
) -> None:
    with ReplayServer(_run(tmp_path)) as server, _client(server) as client:
        got = client.get("https://tools.example.com/weather?city=Lyon")
        assert got.status_code >= 400
        [miss] = server.misses
        assert miss.target == "https://tools.example.com:443/weather?city=Lyon"
        assert "served the tool call get_weather id=call_1" in miss.reason


def test_the_host_is_the_tunnels_not_the_clients_host_header(tmp_path: Path) -> None:
    """Inside the tunnel the request's ``Host`` says another host: it is matched (and missed)
    as a request to the tunnel's recorded host."""
    with ReplayServer(_run(tmp_path)) as server, _client(server) as client:
        got = client.get(WEATHER, headers={"host": "evil.example"})
        assert (got.status_code, got.content) == (200, GOT)
        got = client.get(
            "https://tools.example.com/weather?city=Rome", headers={"host": "evil.example"}
        )
        assert got.status_code >= 400
        assert [m.target for m in server.misses] == [
            "https://tools.example.com:443/weather?city=Rome"
        ]


def test_connect_to_another_host_is_refused_and_untrusted(tmp_path: Path) -> None:
    with ReplayServer(_run(tmp_path)) as server, _client(server) as client:
        with pytest.raises(httpx.ProxyError, match="403"):
            client.get("https://api.openai.com/v1/models")
        assert not server.misses  # not a tool's host: refused, not a tool's miss
    # the CA vouches for the recorded host only: a certificate it would need for another
    # name does not exist (its key was dropped once the leaf was signed)


def test_a_plain_http_recording_makes_no_ca(tmp_path: Path) -> None:
    with ReplayServer(_run(tmp_path, "http://tools.example.com/weather?city=Paris")) as server:
        assert server.tls is None and server.trust_env(os.environ) == {}


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("tools.example.com:443", "tools.example.com"),
        ("127.0.0.1:8443", "127.0.0.1"),
        ("[::1]:443", "::1"),
        ("Tools.Example.COM.:443", "tools.example.com"),
        ("a b.example:443", None),
        ("x\r\nSet-Cookie: y:443", None),
        ("*.example.com:443", None),
        ("-bad.example:443", None),
        ("a" * 64 + ".example:443", None),
        (":443", None),
    ],
)
def test_only_a_name_a_certificate_may_carry_goes_into_one(host: str, name: str | None) -> None:
    assert cert_name(host) == name


def test_the_leaf_names_each_recorded_https_host(tmp_path: Path) -> None:
    x509 = pytest.importorskip("cryptography.x509")
    with ReplayServer(_run(tmp_path, "https://127.0.0.1:8443/weather?city=Paris")) as server:
        assert server.tls is not None
        leaf = x509.load_pem_x509_certificate((server.tls.dir / "leaf.pem").read_bytes())
        sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert [str(v) for v in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
        assert sans.get_values_for_type(x509.DNSName) == []
        with _client(server) as client:
            got = client.get("https://127.0.0.1:8443/weather?city=Paris")
        assert (got.status_code, got.content) == (200, GOT)


def test_a_client_that_does_not_trust_the_replays_ca_fails_closed(tmp_path: Path) -> None:
    """A client verifying against another store (here the one-certificate store, as one that
    pins or ignores SSL_CERT_FILE would): its handshake fails, and the replay keeps a miss
    naming the host and why."""
    from looptap.cassettes.replay.testing.plugin import NO_HOST_CA

    ctx = ssl.create_default_context(cafile=str(NO_HOST_CA))
    with ReplayServer(_run(tmp_path)) as server:
        with httpx.Client(proxy=server.url, verify=ctx, trust_env=False) as client:
            with pytest.raises(httpx.ConnectError):
                client.get(WEATHER)
        for _ in range(1200):  # the server reads the client's alert after the client gave up
            if server.misses:
                break
            time.sleep(0.05)
        [miss] = server.misses
        assert miss.method == "CONNECT" and miss.target == "tools.example.com:443"
        assert "the TLS handshake for the HTTPS tool host tools.example.com:443 failed" in (
            miss.reason
        )
        assert "unmatched: CONNECT tools.example.com:443" in "\n".join(server.report_lines())
