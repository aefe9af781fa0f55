"""HTTPS for the tools' recorded calls: a CA made for one replay, and the TLS the server speaks
inside a client's ``CONNECT`` to a host the recording's tools called over HTTPS.

The certificates are made with ``cryptography``'s X.509 builder (imported here, when a recording
holds an HTTPS tool call: never by the pytest plugin's start-up). At start, one CA and one leaf
certificate naming every such host (a DNS name, or an IP address) are made; the CA's key signs the
leaf and is dropped, never written anywhere, so the CA vouches for nothing else, ever. The leaf's
key, which Python's :mod:`ssl` can load only from a file, is written into a private directory
(``mkdtemp``: 0700) of the system's temp dir, never beside the user's files, and removed as soon as
the server's TLS context has loaded it: a replay killed (SIGKILL) leaves no key on disk. The CA's
certificate and the agent's trust bundles (public) stay there while the server runs and are
removed when it stops; a directory a killed replay left (named by its process id, which no
longer runs) is removed by the next replay's start (:func:`clean_stale`).

The host names come from the cassette (untrusted): each is checked to be an IP address or a DNS
name of letters, digits, ``-`` and ``_`` (253 characters at most, 63 a label) before it goes into
a certificate; one that is not is left out (its ``CONNECT`` is refused and said). What the client
says (its ``CONNECT`` target, SNI, ``Host``) chooses nothing: the certificate is the one leaf, and
the URL a request is matched by is the recorded host's.

Only HTTP/1.1 is offered (ALPN ``http/1.1``): a client that can speak HTTP/2 falls back to it; one
that speaks only HTTP/2 fails its handshake.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import shutil
import ssl
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["ToolTLS", "cert_name", "clean_stale"]

#: The most HTTPS tool hosts one leaf certificate names (a cassette naming more is served for the
#: first ones, sorted; the rest refused and said).
MAX_HOSTS = 1000

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


def cert_name(host: str) -> str | None:
    """The name a certificate may carry for ``host`` (``host:port`` or a bare host, as
    :func:`~cassettes.matching.tool_host` writes it): the IP address or the lowercase DNS name;
    ``None`` when it is neither (a cassette's host is untrusted)."""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
    name = name.strip("[]").lower().rstrip(".")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(p) for p in name.split(".")):
        return None
    return name


class ToolTLS:
    """The CA and leaf certificate of one replay (see the module docstring): :attr:`context` is
    the server side of a tool's TLS, :meth:`trust_env` the variables that make the agent trust
    the CA, :meth:`close` removes the files. Raises :class:`RuntimeError` when ``cryptography``
    is not installed."""

    def __init__(self, hosts: Sequence[str]) -> None:
        #: The names the leaf carries (each host's :func:`cert_name`).
        self.names = sorted({n for n in map(cert_name, hosts) if n is not None})[:MAX_HOSTS]
        clean_stale()
        self.dir = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
        self._made = 0
        try:
            ca_pem, leaf_pem, key_pem = _make(self.names)
            #: The CA's certificate alone (its key is gone).
            self.ca = self._write("replay-tool-ca.pem", ca_pem)
            leaf = self._write("leaf.pem", leaf_pem)
            key = self._write("leaf-key.pem", key_pem)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(leaf, key)
            key.unlink()  # (loaded: the key is never left on disk)
            ctx.set_alpn_protocols(["http/1.1"])
            #: The server side of a tool's TLS (the leaf and its chain).
            self.context = ctx
        except BaseException:
            self.close()
            raise

    def serves(self, host: str) -> bool:
        """Whether the leaf names ``host`` (``host:port``)."""
        name = cert_name(host)
        return name is not None and name in self.names

    def _write(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return path

    def trust_env(self, environ: Mapping[str, str], base: str | None = None) -> dict[str, str]:
        """The variables that make the agent trust the CA for the replay, as the recorder's do for
        its own (``SSL_CERT_FILE``, ``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``,
        ``NODE_EXTRA_CA_CERTS``): a bundle of ``base`` (a CA file; default the one the
        environment names, else OpenSSL's) and the CA, and Node's extra CAs and the CA. Both files
        are in the private directory, removed with it."""
        if base is None:
            base = (
                environ.get("SSL_CERT_FILE")
                or ssl.get_default_verify_paths().cafile
                or "/etc/ssl/certs/ca-certificates.crt"
            )
        ca = self.ca.read_bytes()
        self._made += 1
        node_base = _read(environ.get("NODE_EXTRA_CA_CERTS"))
        bundle = self._write(f"bundle-{self._made}.pem", _joined(_read(base), ca))
        node = self._write(f"node-extra-ca-{self._made}.pem", _joined(node_base, ca))
        return {
            "SSL_CERT_FILE": str(bundle),
            "REQUESTS_CA_BUNDLE": str(bundle),
            "CURL_CA_BUNDLE": str(bundle),
            "NODE_EXTRA_CA_CERTS": str(node),
        }

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


#: How a replay's directory is named: this prefix, its process id, ``-``, mkdtemp's suffix.
_PREFIX = "looptap-replay-tls-"


def clean_stale(root: str | None = None) -> list[Path]:
    """Remove the directories of replays that no longer run (killed before they could clean
    up): this user's, named by a process id that is not alive. Returns those removed."""
    root = root or tempfile.gettempdir()
    gone: list[Path] = []
    try:
        names = [n for n in os.listdir(root) if n.startswith(_PREFIX)][:1000]
    except OSError:
        return gone
    for name in names:
        pid = name[len(_PREFIX) :].split("-", 1)[0]
        path = Path(root) / name
        try:
            st = path.lstat()
        except OSError:
            continue
        if not pid.isdigit() or st.st_uid != os.geteuid() or not path.is_dir() or path.is_symlink():
            continue
        if _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        gone.append(path)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # (someone else's: alive)
    return True


def _read(path: str | None) -> bytes:
    if not path:
        return b""
    try:
        with open(path, "rb") as f:
            return f.read(64 << 20)
    except OSError:
        return b""


def _joined(base: bytes, ca: bytes) -> bytes:
    return (base.rstrip(b"\n") + b"\n" if base.strip() else b"") + ca


def _make(names: Sequence[str]) -> tuple[bytes, bytes, bytes]:
    """(the CA's certificate, the leaf's, the leaf's key), PEM; the CA's key never leaves."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as exc:  # a broken install: the dependency is declared
        raise RuntimeError(
            f"an HTTPS tool call cannot be replayed without the cryptography package: {exc}"
        ) from None

    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=7)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "looptap replay tool CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for n in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            sans.append(x509.DNSName(n))
    leaf_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "looptap replay tool host")])
    leaf = (
        x509.CertificateBuilder()
        .subject_name(leaf_name)
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    del ca_key  # never written: the CA signs this leaf and nothing else
    pem = serialization.Encoding.PEM
    return (
        ca.public_bytes(pem),
        leaf.public_bytes(pem) + ca.public_bytes(pem),
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
