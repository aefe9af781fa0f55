"""A private CA and a leaf it signs, made with openssl (the tests of a tool that trusts a CA of its
own: tests/proxy/test_e2e_tool_trust.py, and the addon's in-process handshake tests, which run in
the recorder's environment and must not import a module of the client matrix)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def openssl(*args: str) -> str:
    return subprocess.run(["openssl", *args], check=True, capture_output=True, text=True).stdout


def private_ca(directory: Path) -> dict[str, Path]:
    """A private CA, a leaf for 127.0.0.1 and localhost signed by it, and a hashed directory
    holding the CA (``SSL_CERT_DIR``'s form)."""
    d = {n: directory / f"{n}.pem" for n in ("ca", "ca-key", "leaf", "leaf-key")}
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", str(d["ca-key"]), "-out", str(d["ca"]), "-days", "2",
             "-subj", "/CN=looptap test private CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    csr = directory / "leaf.csr"
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(d["leaf-key"]), "-out", str(csr),
             "-subj", "/CN=tools.internal")  # fmt: skip
    ext = directory / "leaf.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", str(csr), "-CA", str(d["ca"]), "-CAkey", str(d["ca-key"]),
             "-CAcreateserial", "-out", str(d["leaf"]), "-days", "2",
             "-extfile", str(ext))  # fmt: skip
    hashed = directory / "certs"
    hashed.mkdir()
    name = openssl("x509", "-hash", "-noout", "-in", str(d["ca"])).strip()
    shutil.copy(d["ca"], hashed / f"{name}.0")
    d["dir"] = hashed
    return d
