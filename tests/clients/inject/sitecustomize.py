"""Loaded by every Python client of the matrix (PYTHONPATH): with ``LOOPTAP_MATRIX_BUG`` set, the
first qualifying LLM request of the process is mutated on its way out (see mutate.py). httpx is
what every client under test sends with (the official SDKs, LangChain, LiteLLM, smolagents,
llama-index, pydantic-ai, openai-agents)."""

from __future__ import annotations

import os

_KIND = os.environ.get("LOOPTAP_MATRIX_BUG")

if _KIND:
    import json

    import httpx
    from mutate import MARK, Injector

    _injector = Injector(_KIND)

    def _rewrite(request: httpx.Request) -> httpx.Request:
        if request.method != "POST":
            return request
        try:
            body = json.loads(request.read() or b"null")
        except ValueError:
            return request
        if not _injector.mutate(request.url.path, body):
            return request
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("content-length", "transfer-encoding")}
        headers[MARK] = _KIND
        return httpx.Request(request.method, request.url, headers=headers, content=json.dumps(body).encode(), extensions=request.extensions)

    _send = httpx.Client.send
    _asend = httpx.AsyncClient.send

    def send(self, request, **kw):  # type: ignore[no-untyped-def]
        return _send(self, _rewrite(request), **kw)

    async def asend(self, request, **kw):  # type: ignore[no-untyped-def]
        return await _asend(self, _rewrite(request), **kw)

    httpx.Client.send = send  # type: ignore[method-assign]
    httpx.AsyncClient.send = asend  # type: ignore[method-assign]
