"""The recorder's listeners as the live upstreams of a replay: where a request that goes live (a
fork's past its cursor, a pytest ``new_episodes`` request the cassette lacks) is sent to be
recorded, read from the environment the recorder gives its clients (its ``export`` lines).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ... import providers

__all__ = ["live_bases", "named_listeners"]


def live_bases(recorder_env: dict[str, str]) -> dict[str, str]:
    """The recorder's reverse listener per API name (its name → ``http://127.0.0.1:PORT``), the
    ones ``--upstream NAME=URL`` added (``NAME_BASE_URL``) among them."""
    bases: dict[str, str] = {}
    for name, (_upstream, variables, _suffix) in providers.REVERSE_UPSTREAMS.items():
        for var in variables:
            if var in recorder_env:
                u = urlsplit(recorder_env[var])
                bases[name] = f"{u.scheme}://{u.netloc}"
                break
    for var, name in named_listeners(recorder_env).items():
        bases.setdefault(name, recorder_env[var].rstrip("/"))
    return bases


_RECORDER_VAR = "LOOPTAP_RECORDER"  # the recorder's listeners, host:port,… (proxy/config.py)


def named_listeners(recorder_env: dict[str, str]) -> dict[str, str]:
    """The base-URL variables of the listeners ``--upstream NAME=URL`` added for a name no
    provider has (``MYAPI_BASE_URL`` → ``myapi``): those that point at this recorder."""
    ours = {x.strip() for x in recorder_env.get(_RECORDER_VAR, "").split(",") if x.strip()}
    known = {v for _, vs, _ in providers.REVERSE_UPSTREAMS.values() for v in vs}
    return {
        var: var.removesuffix("_BASE_URL").lower().replace("_", "-")
        for var, value in recorder_env.items()
        if var.endswith("_BASE_URL") and var not in known and urlsplit(value).netloc in ours
    }
