"""Loaded by every Python client of the matrix (PYTHONPATH): with ``LOOPTAP_MATRIX_BUG`` set, the
first qualifying LLM request of the process is mutated on its way out (see mutate.py). httpx is
what every client under test sends with (the official SDKs, LangChain, LiteLLM, smolagents,
llama-index, pydantic-ai, openai-agents): ``httpx``, or ``httpx2`` for the current openai,
anthropic and google-genai SDKs; both are wrapped where present. google-genai sends its async
requests with aiohttp when that is installed (Google ADK's runs): ``aiohttp`` is wrapped too."""

from __future__ import annotations

import os

_KIND = os.environ.get("LOOPTAP_MATRIX_BUG")

if _KIND:
    import importlib
    import json
    from urllib.parse import urlsplit

    from mutate import MARK, Injector

    _injector = Injector(_KIND)

    def _wrap(mod):  # type: ignore[no-untyped-def]
        def rewrite(request):  # type: ignore[no-untyped-def]
            if request.method != "POST":
                return request
            try:
                body = json.loads(request.read() or b"null")
            except ValueError:
                return request
            if not _injector.mutate(request.url.path, body):
                return request
            headers = {
                k: v
                for k, v in request.headers.items()
                if k.lower() not in ("content-length", "transfer-encoding")
            }
            headers[MARK] = _KIND
            return mod.Request(
                request.method,
                request.url,
                headers=headers,
                content=json.dumps(body).encode(),
                extensions=request.extensions,
            )

        send, asend = mod.Client.send, mod.AsyncClient.send

        def sync_send(self, request, **kw):  # type: ignore[no-untyped-def]
            return send(self, rewrite(request), **kw)

        async def async_send(self, request, **kw):  # type: ignore[no-untyped-def]
            return await asend(self, rewrite(request), **kw)

        mod.Client.send = sync_send
        mod.AsyncClient.send = async_send

    for _name in ("httpx", "httpx2"):
        try:
            _wrap(importlib.import_module(_name))
        except ImportError:
            pass

    def _wrap_aiohttp(mod):  # type: ignore[no-untyped-def]
        request = mod.ClientSession._request

        async def _request(self, method, url, **kw):  # type: ignore[no-untyped-def]
            data = kw.get("data")
            if str(method).upper() == "POST" and isinstance(data, (str, bytes)):
                try:
                    body = json.loads(data)
                except ValueError:
                    body = None
                if body is not None and _injector.mutate(urlsplit(str(url)).path, body):
                    kw["data"] = json.dumps(body).encode()
                    kw["headers"] = {
                        **{
                            k: v
                            for k, v in dict(kw.get("headers") or {}).items()
                            if k.lower() != "content-length"
                        },
                        MARK: _KIND,
                    }
            return await request(self, method, url, **kw)

        mod.ClientSession._request = _request

    try:
        _wrap_aiohttp(importlib.import_module("aiohttp"))
    except ImportError:
        pass
