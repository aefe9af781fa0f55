"""The recorder's listeners as the live upstreams of a replay: where a request that goes live (a
fork's past its cursor, a pytest ``new_episodes`` request the cassette lacks) is sent to be
recorded, read from the environment the recorder gives its clients (its ``export`` lines); and
where a fork's live requests may go at all (:func:`destinations`), decided once from the recorded
run and what the user gave, never wider: a run recorded against a local or fake upstream never
reaches a vendor's API unless the user names it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ... import providers

__all__ = [
    "VENDORS",
    "Destinations",
    "bases_of",
    "destinations",
    "live_bases",
    "named_listeners",
    "recorded_origins",
]


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


#: What the recorder's built-in listeners forward to when no ``--upstream`` names them: the
#: vendors' own APIs (name → ``https://host``).
VENDORS: dict[str, str] = {name: up for name, (up, _v, _s) in providers.REVERSE_UPSTREAMS.items()}


def recorded_origins(pairs: Iterable[tuple[Any, Any]]) -> dict[str, set[str]]:
    """Where the recorded run sent each API's requests (a listener name, as ``--upstream`` names
    it → the ``scheme://host[:port]`` its round trips' URLs name): read from the run's own
    ``(exchange, round trip)`` pairs, a tool's HTTP call and a family no listener serves left
    out."""
    out: dict[str, set[str]] = {}
    for ex, rt in pairs:
        if getattr(ex, "tool", False):
            continue
        name = next((n for n in VENDORS if str(rt.family).startswith(n)), None)
        u = urlsplit(str(ex.url))
        if name is None or u.scheme not in ("http", "https") or not u.hostname:
            continue
        host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
        out.setdefault(name, set()).add(f"{u.scheme}://{host}" + (f":{u.port}" if u.port else ""))
    return out


@dataclass(frozen=True)
class Destinations:
    """Where the live requests of a fork of a recorded run go, per API, decided once from the run
    and what the user gave (docs/fork.md, "Where the live requests go"): an API named by
    ``--upstream`` goes there; an API the run reached elsewhere than at its vendor (a local
    server, a fake, a gateway) goes where the run reached it (``pinned``: the recorder is given
    it as ``--upstream``, so nothing falls back to the vendor's API); an API the run reached at
    its vendor goes to the recorder's default there (the vendor's API, or the base-URL variable
    the user set for it). A run that reached one API at two places pins neither (``mixed``): a
    fork refuses to guess, unless ``--upstream`` names it."""

    given: dict[str, str]
    pinned: dict[str, str]
    mixed: dict[str, list[str]]

    @property
    def bases(self) -> dict[str, str]:
        """Every API's destination (the vendors' where nothing else is decided)."""
        return VENDORS | self.pinned | self.given

    def lines(self) -> list[str]:
        """What was decided, said once (each pinned API, from the recording)."""
        return [
            f"{name}: live requests go to {url}, where the recorded run sent them "
            f"(--upstream {name}=URL sends them elsewhere)"
            for name, url in sorted(self.pinned.items())
        ]

    def refusal(self) -> str | None:
        """Why nothing may be sent (an API the run reached at more than one place, none given)."""
        if not self.mixed:
            return None
        name, urls = sorted(self.mixed.items())[0]
        return (
            f"the recorded run sent {name}'s requests to {len(urls)} places ({', '.join(urls)}): "
            f"give --upstream {name}=URL to say where its live requests go (never the vendor's "
            "API by default); nothing sent"
        )


def destinations(origins: dict[str, set[str]], given: dict[str, str]) -> Destinations:
    """:class:`Destinations` of a run that reached ``origins`` (:func:`recorded_origins`), with
    ``given`` (``--upstream`` of this command, name → URL, as ``bases_of`` reads them)."""
    pinned: dict[str, str] = {}
    mixed: dict[str, list[str]] = {}
    for name, urls in origins.items():
        if name in given:
            continue
        away = sorted(u for u in urls if u != VENDORS.get(name))
        if len(urls) > 1 and away:
            mixed[name] = sorted(urls)
        elif away:
            pinned[name] = away[0]
    return Destinations(dict(given), pinned, mixed)


def bases_of(items: Iterable[str], flag: str) -> dict[str, str]:
    """``NAME=URL`` items (``--live``, ``--upstream``) as the bases
    :func:`~cassettes.replay.forking.cursor.live_router` routes by; raises ``ValueError`` for an
    item of another form. Here, beside :func:`destinations`, not in the cursor's module: ``looptap
    run`` reads ``--upstream`` and imports no fork (tests/test_startup_imports.py)."""
    bases: dict[str, str] = {}
    for item in items:
        name, sep, url = str(item).partition("=")
        if not sep or not name.strip() or not url.startswith(("http://", "https://")):
            raise ValueError(f"{flag} wants NAME=http(s)://host[:port], not {item[:80]!r}")
        bases[name.strip().lower()] = url.strip().rstrip("/")
    return bases
