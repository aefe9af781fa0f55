"""Run inside a fresh network and mount namespace (``unshare --net --mount``, as root): Codex with
its **default** configuration (the built-in ``openai`` provider, Responses over a WebSocket to
``wss://api.openai.com/v1/responses`` through ``HTTPS_PROXY``) recorded by ``looptap run``, with
``api.openai.com``, ``chatgpt.com`` and ``auth.openai.com`` resolved to a loopback TLS server of
ours, then the cassette replayed offline to Codex (``openai_base_url`` pointed at ``looptap
replay``'s server).

    python codex_default_ns.py WORKDIR CODEX RECORDER_PYTHON SECRET [chatgpt|live|spawn]

``spawn``: the scripted model calls spawn_agent, then wait_agent, then answers (recorded only).

``chatgpt``: Codex signed in with ChatGPT (an ``auth.json`` with tokens, no API key; the access
token is SECRET). It then talks to ``chatgpt.com/backend-api/…``: the Responses WebSocket at
``/backend-api/codex/responses`` after a workspace routing discovery
(``GET /backend-api/wham/accounts/check``), which the server answers; its other backend calls get
404. Replayed with ``openai_base_url`` and ``chatgpt_base_url`` both at the replay server.

Prints one JSON line with what happened; the test (test_codex_websocket.py) judges it."""

from __future__ import annotations

import datetime
import json
import os
import ssl
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.support import progress  # noqa: E402

_HOSTS = ("api.openai.com", "chatgpt.com", "auth.openai.com", "generativelanguage.googleapis.com")


def certificates(work: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for api.openai.com and chatgpt.com signed by it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "looptap test upstream CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "api.openai.com")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(h) for h in _HOSTS]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem, cert_pem, key_pem = (
        work / "upstream-ca.pem",
        work / "upstream.pem",
        work / "upstream-key.pem",
    )
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_pem.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca_pem, cert_pem, key_pem


def main() -> int:
    work, codex, recorder, secret = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    chatgpt = len(sys.argv) > 5 and sys.argv[5] == "chatgpt"
    live = len(sys.argv) > 5 and sys.argv[5] == "live"
    spawn = len(sys.argv) > 5 and sys.argv[5] == "spawn"
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    hosts = work / "hosts"
    hosts.write_text(f"127.0.0.1 localhost {' '.join(_HOSTS)}\n::1 localhost\n")
    subprocess.run(["mount", "--bind", str(hosts), "/etc/hosts"], check=True)
    _, cert_pem, key_pem = certificates(work)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_pem, key_pem)

    from tests.support.ws_upstream import WsResponsesUpstream

    home = work / "home"
    codex_home = work / "codex-home"
    for d in (home, codex_home, work / "cwd"):
        d.mkdir(exist_ok=True)
    config = "[analytics]\nenabled = false\n\n[features]\nplugins = false\n"
    (codex_home / "config.toml").write_text(config)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().endswith(("_PROXY", "_API_KEY", "_BASE_URL"))
    }
    env.update(HOME=str(home), CODEX_HOME=str(codex_home), PYTHONPATH=str(REPO))
    result: dict[str, object] = {}
    if chatgpt:  # signed in with ChatGPT: Codex talks to chatgpt.com/backend-api/codex
        token = {
            "id_token": _jwt(),
            "access_token": secret,
            "refresh_token": f"rt_{os.urandom(12).hex()}",
            "account_id": "acc",
        }
        result.update(id_token=token["id_token"], refresh_token=token["refresh_token"])
        (codex_home / "auth.json").write_text(
            json.dumps(
                {
                    "OPENAI_API_KEY": None,
                    "tokens": token,
                    "last_refresh": datetime.datetime.now(datetime.UTC).isoformat(),
                }
            )
        )
    else:
        env["OPENAI_API_KEY"] = secret
    out = work / "run.jsonl"
    if live:  # google-genai's Live client (it always speaks wss://, so it goes through HTTPS_PROXY)
        from tests.proxy.test_websocket import LIVE

        script = work / "live.py"
        script.write_text(
            "import json, os, sys\ndef out(**kw):\n    print(json.dumps(kw), flush=True)\n" + LIVE
        )
        env["GEMINI_API_KEY"] = secret
        with WsResponsesUpstream("127.0.0.1", 443, ctx) as up:
            rec = progress.run(
                [
                    recorder,
                    "-m",
                    "looptap.cassettes.cli",
                    "run",
                    "-o",
                    str(out),
                    "--confdir",
                    str(work / "confdir"),
                    "--ssl-insecure",
                    "--",
                    sys.executable,
                    str(script),
                ],
                env=env,
                capture_output=True,
                text=True,
                cwd=work / "cwd",
                stdin=subprocess.DEVNULL,
            )
            result.update(
                record_rc=rec.returncode,
                record_stdout=rec.stdout[-3000:],
                record_stderr=rec.stderr[-4000:],
                upstream_paths=up.paths,
            )
        print(json.dumps(result))
        return 0
    from tests.support.ws_upstream import spawn_script

    with WsResponsesUpstream(
        "127.0.0.1",
        443,
        ctx,
        http=_backend if chatgpt else None,
        answer=spawn_script() if spawn else None,
    ) as up:
        rec = _run(
            [
                recorder,
                "-m",
                "looptap.cassettes.cli",
                "run",
                "-o",
                str(out),
                "--confdir",
                str(work / "confdir"),
                "--ssl-insecure",
                "--",
                codex,
                "exec",
                "--skip-git-repo-check",
                "What is the weather in Paris?",
            ],
            env,
            work / "cwd",
        )
        result.update(
            record_rc=rec.returncode,
            record_stdout=rec.stdout[-3000:],
            record_stderr=rec.stderr[-4000:],
            upstream_paths=up.paths,
            upstream_received=[m.get("type") for m in up.received],
            # every request that reached chatgpt.com (with http): its credentials as
            # booleans, never the values
            upstream_requests=[
                {
                    "method": m,
                    "target": t,
                    "bearer_is_secret": _hdr(h, "authorization") == f"Bearer {secret}",
                    "account": _hdr(h, "chatgpt-account-id"),
                    "websocket": _hdr(h, "upgrade") == "websocket",
                }
                for m, t, h in up.requests
            ],
        )
    if rec.returncode != 0 or not out.exists() or spawn:
        print(json.dumps(result))
        return 0
    # Offline: Codex's default provider pointed at the replay server (its openai_base_url key).
    # Signed in with ChatGPT, the backend's other calls go there too (chatgpt_base_url), so none
    # leaves the machine with the login's token; see the test's docstring for why the turns
    # cannot go through chatgpt_base_url itself.
    from looptap.cassettes.replay.serving.server import ReplayServer

    with ReplayServer(out) as srv:
        keys = f'openai_base_url = "{srv.url}/v1"\n'
        if chatgpt:
            keys += f'chatgpt_base_url = "{srv.url}/backend-api/"\n'
        (codex_home / "config.toml").write_text(keys + config)
        again = _run(
            [codex, "exec", "--skip-git-repo-check", "What is the weather in Paris?"],
            env,
            work / "cwd",
        )
        result.update(
            replay_rc=again.returncode,
            replay_stdout=again.stdout[-3000:],
            replay_stderr=again.stderr[-3000:],
            replay_misses=["\n".join(m.lines()) for m in srv.misses],
            replay_statuses=[ex.status for ex in srv.served],
            replay_miss_targets=[m.target for m in srv.misses],
            replay_served=[
                [ex.method, urlsplit(ex.url).path, ex.status, ex.notes] for ex in srv.served
            ],
            replay_bases=srv.matcher.bases,
        )
    print(json.dumps(result))
    return 0


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``cmd``; if it stops making progress (no wall-clock limit), what it printed until
    killed, with return code -9."""
    try:
        return progress.run(
            cmd, env=env, capture_output=True, text=True, cwd=cwd, stdin=subprocess.DEVNULL
        )
    except progress.Hung as exc:
        return subprocess.CompletedProcess(cmd, -9, "", f"(killed: {exc})")


def _hdr(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


def _backend(
    method: str, target: str, headers: list[tuple[str, str]], body: bytes
) -> tuple[int, str, bytes]:
    """chatgpt.com's answers to ChatGPT-login Codex's calls besides its Responses WebSocket: the
    workspace routing discovery, which it needs before any turn (the account's backend origin);
    404 for the rest (models, the connectors' MCP server, settings), which it goes on without."""
    if method == "GET" and target.startswith("/backend-api/wham/accounts/check"):
        account = {
            "id": "acc",
            "workspace_backend_origin": "https://chatgpt.com",
            "account_routing_override": "NO_CONSTRAINT",
        }
        return 200, "application/json", json.dumps({"accounts": [account]}).encode()
    return 404, "application/json", b'{"detail": "Not Found"}'


def _jwt() -> str:
    import base64

    def b64(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    claims = {
        "email": "dev@example.com",
        "https://api.openai.com/auth": {"chatgpt_plan_type": "plus", "chatgpt_account_id": "acc"},
    }
    return f"{b64({'alg': 'none'})}.{b64(claims)}.sig"


if __name__ == "__main__":
    sys.exit(main())
