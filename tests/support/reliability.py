"""Helpers shared by the reliability suite (tests/reliability) and bench/load.py."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

from looptap.cassettes.storage import RecordFile, read_records
from looptap.cassettes.wire import Exchange
from tests.support.recorder import RecorderProcess, needs_recorder
from tests.support.upstream import FakeUpstream
from tests.support.wire import Response, http_request

__all__ = [
    "MODES",
    "Target",
    "chat_body",
    "encoded_forms",
    "find_on_disk",
    "needs_recorder",
    "wait_recorded",
]


#: How an agent reaches the upstream: directly, through a reverse listener (base URL), or through
#: the forward proxy (HTTP_PROXY, absolute-form requests).
MODES = ("reverse", "forward")


@dataclass
class Target:
    mode: str  # "direct" | "reverse" | "forward"
    upstream: FakeUpstream
    recorder: RecorderProcess | None = None

    def request(
        self,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        method: str = "POST",
        **kw: Any,
    ) -> Response:
        up = self.upstream
        if self.mode == "direct":
            return http_request(up.host, up.port, method, target, headers, body, **kw)
        assert self.recorder is not None
        if self.mode == "reverse":
            port = self.recorder.port(_listener_var(target))
            return http_request(
                "127.0.0.1", port, method, _listener_path(target), headers, body, **kw
            )
        return http_request(
            "127.0.0.1",
            self.recorder.forward_port,
            method,
            target,
            headers,
            body,
            proxy=True,
            upstream=up.url,
            **kw,
        )


def _listener_var(target: str) -> str:
    if target.startswith("/v1/messages"):
        return "ANTHROPIC_BASE_URL"
    if target.startswith("/v1beta/"):
        return "GOOGLE_GEMINI_BASE_URL"
    return "OPENAI_BASE_URL"


def _listener_path(target: str) -> str:
    # Every reverse listener forwards its path unchanged to the upstream (OPENAI_BASE_URL ends in
    # /v1, which the SDK puts in front of /chat/completions: the wire path is the same).
    return target


def chat_body(
    marker: str, stream: bool = True, history: list[dict[str, Any]] | None = None, **extra: Any
) -> bytes:
    msgs = (
        history
        if history is not None
        else [{"role": "user", "content": f"What is the capital of France? [{marker}]"}]
    )
    return json.dumps({"model": "gpt-4o", "messages": msgs, "stream": stream, **extra}).encode()


def recorded(cas: RecordFile, marker: str) -> list[Exchange]:
    return [ex for ex in cas.exchanges if marker.encode() in ex.request_body or marker in ex.url]


def wait_recorded(out: Path, marker: str, n: int = 1) -> tuple[RecordFile, list[Exchange]]:
    """The cassette once ``n`` round trips whose request carries ``marker`` are in it, or as it is
    once the recorder (and everything else the test started) stopped making progress and the
    file stopped growing (the caller's assertion then says what is missing)."""
    from tests.support.progress import Hung, Watch

    watch = Watch(
        os.getpid(),
        progress=lambda: out.stat().st_size if out.exists() else -1,
        what=f"the recording of {marker}",
    )
    while True:
        cas = read_records(out) if out.exists() and out.stat().st_size else None
        found = recorded(cas, marker) if cas is not None else []
        if len(found) >= n and cas is not None:
            return cas, found
        try:
            watch.check()
        except Hung:
            assert cas is not None, f"no cassette at {out}"
            return cas, found
        time.sleep(0.1)


def encoded_forms(secret: str) -> dict[str, bytes]:
    """The byte forms a secret could take on disk: raw, URL-encoded, JSON-escaped, and base64 at
    each of the three alignments inside a longer base64 text (standard and URL-safe)."""
    raw = secret.encode()
    forms = {
        "raw": raw,
        "url": quote(secret, safe="").encode(),
        "url+": quote_plus(secret).encode(),
    }
    forms["json"] = json.dumps(secret)[1:-1].encode()
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + raw)
        # The 4-character groups made of the secret's bytes only (independent of the neighbours).
        core = enc[0 if k == 0 else 4 : 4 * ((k + len(raw)) // 3)]
        if len(core) >= 12:
            forms[f"b64@{k}"] = core
            forms[f"b64url@{k}"] = core.replace(b"+", b"-").replace(b"/", b"_")
    return {k: v for k, v in forms.items() if v}


def find_on_disk(
    root: Path, secrets: list[str], skip: Callable[[Path], bool] | None = None
) -> list[str]:
    """Every (file, secret form) under ``root`` holding a secret in any of its encoded forms."""
    needles = [(s, name, form) for s in secrets for name, form in encoded_forms(s).items()]
    hits: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if skip is not None and skip(path):
            continue
        data = path.read_bytes()
        for s, name, form in needles:
            if form in data:
                hits.append(f"{path}: {name} form of {s[:24]}…")
    return hits
