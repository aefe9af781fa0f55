"""What a replayed test's clients can reach: the proxy variables and the CA store the plugin sets.

A client that ignores the base URL but honours ``HTTPS_PROXY`` is refused by the replay server
(its ``CONNECT``). A client that ignores both cannot complete a TLS handshake with a host the
system's store trusts: during a replayed test ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` name a store
of one certificate whose key was never kept, unless the user's own store or ``NO_PROXY`` says
otherwise; a fork's live requests keep the store the test started with.

The "system store" here is a temporary file holding a throwaway self-signed certificate for
127.0.0.1 (made by the test, its key in the temp dir): the test points ``SSL_CERT_FILE`` at it
and makes ``ssl.get_default_verify_paths()`` name it as OpenSSL's own file, as an environment
naming the system bundle (``SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt``) does.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path

import pytest

from looptap.cassettes.net import Trust, Upstream, UpstreamError
from looptap.cassettes.replay.testing.plugin import NO_HOST_CA
from tests.replay.conftest import tool_loop, write
from tests.replay.test_fork import FORK_TEST, new_model_route
from tests.replay.test_plugin import NOPLUG, expect
from tests.support.scripted import ScriptedUpstream

pytest_plugins = ["pytester"]


def _host_cert(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate (and its key) for 127.0.0.1: the host and its own CA."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "a host the system trusts")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "host-cert.pem", directory / "host-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def host_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    # made once: cryptography's classes are not the same ones after an in-process inner run
    return _host_cert(tmp_path_factory.mktemp("tls-host"))


@pytest.fixture
def host(host_cert: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The host's certificate and key; the environment clean of proxies and base URLs, and
    ``SSL_CERT_FILE`` naming a store that trusts the host."""
    cert, key = host_cert
    for k in (
        "OPENAI_BASE_URL",
        "OPENAI_API_BASE",
        "OPENAI_API_KEY",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "SSL_CERT_DIR",
        "CI",
    ):
        monkeypatch.delenv(k, raising=False)
        monkeypatch.delenv(k.lower(), raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    return cert, key


def _as_system_store(monkeypatch: pytest.MonkeyPatch, bundle: Path) -> None:
    """``bundle`` is OpenSSL's own CA file, as far as anyone in this process asks."""
    real = ssl.get_default_verify_paths
    monkeypatch.setattr(
        ssl, "get_default_verify_paths", lambda: real()._replace(openssl_cafile=str(bundle))
    )


DIRECT = '''
import os
import ssl
import urllib.error
import urllib.request

import pytest

def fetch():
    """A client that ignores the proxy variables and any base URL: urllib without a proxy
    handler, verifying against the default store."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ssl.create_default_context()))
    try:
        with opener.open(os.environ["TLS_HOST"] + "/v1/models", timeout=60) as r:
            return str(r.status)
    except urllib.error.HTTPError as exc:
        return str(exc.code)
    except urllib.error.URLError as exc:
        return type(exc.reason).__name__

def test_not_replayed():
    assert fetch() == "404"  # the host's own answer to GET /v1/models: the store trusts it

@pytest.mark.looptap("cassettes/loop.jsonl")
def test_replayed(looptap):
    assert fetch() == os.environ["EXPECT"]
'''  # noqa: E501


@pytest.mark.parametrize(
    ("case", "no_proxy", "expected"),
    [
        ("system store", None, "SSLCertVerificationError"),
        (
            "system store, NO_PROXY naming only loopback",
            "localhost,127.0.0.0/8,[::1]:8080,.localhost",
            "SSLCertVerificationError",
        ),
        ("system store, NO_PROXY naming a remote host", "localhost,models.internal.example", "404"),
        ("the user's own SSL_CERT_FILE", None, "404"),
    ],
)
def test_a_client_ignoring_the_proxy_cannot_reach_a_tls_host_during_replay(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    host: tuple[Path, Path],
    case: str,
    no_proxy: str | None,
    expected: str,
) -> None:
    if case.startswith("system store"):
        _as_system_store(monkeypatch, host[0])
    if no_proxy is not None:
        monkeypatch.setenv("NO_PROXY", no_proxy)
    pytester.makepyfile(test_inner=DIRECT)
    (pytester.path / "cassettes").mkdir()
    write(pytester.path / "cassettes" / "loop.jsonl", tool_loop())
    with ScriptedUpstream(new_model_route, tls=host) as tls_host:
        monkeypatch.setenv("TLS_HOST", tls_host.url)
        monkeypatch.setenv("EXPECT", expected)
        result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=2)


PROXIED = '''
import os
import pytest
from openai import APIConnectionError, OpenAI

@pytest.mark.looptap("cassettes/loop.jsonl")
def test_proxied(looptap):
    client = OpenAI(base_url="https://api.openai.com/v1", max_retries=0)  # the base URL ignored; HTTPS_PROXY honoured
    with pytest.raises(APIConnectionError):
        client.models.list()
    refused = [(x.method, x.status, b"".join(c for _, c in x.response_chunks).decode()) for x in looptap.server.served]
    assert refused == [("CONNECT", 403, f"looptap replay refuses CONNECT api.openai.com:443: the run is replayed offline from {looptap.path}; "
                        "point the client's base URL at the replay server instead")]
'''  # noqa: E501


def test_a_client_ignoring_the_base_url_is_refused_through_the_proxy(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, host: tuple[Path, Path]
) -> None:
    pytest.importorskip("openai")
    _as_system_store(monkeypatch, host[0])
    pytester.makepyfile(test_inner=PROXIED)
    (pytester.path / "cassettes").mkdir()
    write(pytester.path / "cassettes" / "loop.jsonl", tool_loop())
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1)
    expect(result, "test_proxied: replay *loop.jsonl: played 0 of 2 recorded round trips")


def test_a_fork_reaches_its_tls_upstream_with_the_store_the_test_started_with(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, host: tuple[Path, Path]
) -> None:
    pytest.importorskip("openai")
    _as_system_store(monkeypatch, host[0])
    overridden = (
        f'\n    assert os.environ["SSL_CERT_FILE"] == {str(NO_HOST_CA)!r}  # the test\'s own '
        "clients trust no host\n"
    )
    pytester.makepyfile(
        test_inner=FORK_TEST.replace(
            "\n    answer = agent()\n", overridden + "    answer = agent()\n"
        )
    )
    (pytester.path / "cassettes").mkdir()
    write(pytester.path / "cassettes" / "loop.jsonl", tool_loop())
    with ScriptedUpstream(new_model_route, tls=host) as live:
        monkeypatch.setenv("FAKE_NEW_MODEL", live.url)
        assert live.url.startswith("https://")
        result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1)
    assert [x.request.model for x in live.log] == ["new-model-2", "new-model-2"]


def test_the_forwarder_verifies_against_the_store_it_was_given(
    monkeypatch: pytest.MonkeyPatch, host: tuple[Path, Path]
) -> None:
    """Taken before the environment changed, a :class:`Trust` keeps the store; without one the
    forwarder reads the environment when it connects."""
    import asyncio

    trust = Trust.now()
    assert trust.cafile == str(host[0])
    monkeypatch.setenv("SSL_CERT_FILE", str(NO_HOST_CA))
    monkeypatch.setenv("SSL_CERT_DIR", str(NO_HOST_CA.parent))

    async def status(t: Trust | None, base: str) -> int:
        response = await Upstream(base, trust=t).send("GET", "/v1/models", [], b"")
        async for _ in response.pieces():
            pass
        return response.status

    with ScriptedUpstream(new_model_route, tls=host) as up:
        assert asyncio.run(status(trust, up.url)) == 404
        with pytest.raises(UpstreamError, match="certificate verify failed"):
            asyncio.run(status(None, up.url))
