"""``looptap export --html``: a run as one self-contained web page.

The data comes from :func:`cassettes.views.report.report_data`; this module only puts it in a
page: a Jinja2 template (autoescaped: the run's name is the only recorded text it writes itself),
the page's script and styles, and uPlot (MIT, vendored from npm with its licence in
``report_assets/``) for the token-cost growth chart. Jinja2 is the ``html`` extra, imported here
only when a page is written.

**Nothing from the recording runs.** The data is JSON inside ``<script type="application/json">``
(never executed), with ``<``, ``>``, ``&``, U+2028 and U+2029 written as ``\\uXXXX`` escapes so
no ``</script>`` or ``<!--`` can end the element; the script writes recorded text with
``textContent`` only. A Content-Security-Policy meta allows nothing by default and the page's own
script and style only by their SHA-256 hashes, so even a break-out would not run, and nothing is
fetched when the page is viewed (no network, no server).

**Size.** Data over :data:`COMPRESS_OVER` bytes is embedded gzip-compressed (base64), when that
saves at least a third, and inflated in the browser by its own ``DecompressionStream``.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from importlib.resources import files
from typing import Any

import orjson

from ..errors import CassetteError
from ..hints import count, install_command

__all__ = ["embed_json", "render_fleet_html", "render_html"]

#: Data larger than this (bytes of JSON) is embedded compressed when that saves enough.
COMPRESS_OVER = 256 * 1024
_ESCAPES = {
    b"<": b"\\u003c",
    b">": b"\\u003e",
    b"&": b"\\u0026",
    "\u2028".encode(): b"\\u2028",
    "\u2029".encode(): b"\\u2029",
}


class HtmlExtraMissing(CassetteError):
    """The page needs Jinja2 (the ``html`` extra)."""


def embed_json(value: Any) -> str:
    """``value`` as JSON safe inside a ``<script type="application/json">`` element: no ``<``,
    ``>`` or ``&`` (so no ``</script>``, ``<!--`` or ``<![CDATA[``) and no U+2028/U+2029 raw;
    each is a ``\\uXXXX`` escape, so ``JSON.parse`` gives back the same value."""
    data = orjson.dumps(value)
    for raw, esc in _ESCAPES.items():
        data = data.replace(raw, esc)
    return data.decode()


def _asset(name: str) -> str:
    return (
        files("looptap.cassettes.views").joinpath("report_assets", name).read_text(encoding="utf-8")
    )


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _payload(data: dict[str, Any], compress: bool | None) -> str:
    plain = orjson.dumps(data)
    if compress is None:
        compress = len(plain) > COMPRESS_OVER
    if compress:
        packed = base64.b64encode(gzip.compress(plain, compresslevel=9, mtime=0)).decode()
        if compress is True or len(packed) * 3 <= len(plain) * 2:
            return embed_json({"gzip": packed})
    return embed_json(data)


def _render(template: str, what: str, **values: Any) -> str:
    """The page ``template`` (an asset) rendered autoescaped with ``values`` and looptap's
    version; :class:`HtmlExtraMissing` without Jinja2."""
    try:
        import jinja2
    except ImportError as exc:
        raise HtmlExtraMissing(
            f"{what} needs Jinja2 (the html extra): {install_command('html')}"
        ) from exc
    from .._version import __version__  # its metadata read, when a page is written

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(_asset(template)).render(version=__version__, **values)


def render_fleet_html(
    summary: str, tables: list[tuple[str, list[str], list[list[Any]]]], heading: str = "fleet"
) -> str:
    """``looptap fleet page``: the fleet's named questions as plain tables, each cell text
    (autoescaped, already cleaned by the caller), or ``(text, href)``: a link to a relative
    address the caller made (a run's report beside the page); no script at all, the page's
    style allowed by its hash only. ``heading``: the page's title after ``looptap ·`` (``run
    --verify``'s report is such a page too)."""
    style = _asset("page.css")
    csp = f"default-src 'none'; style-src {_hash(style)}; base-uri 'none'; form-action 'none'"
    return _render(
        "fleet.html.j2",
        f"the {heading} page",
        csp=csp,
        style=style,
        summary=summary,
        tables=tables,
        heading=heading,
    )


def render_html(data: dict[str, Any], *, compress: bool | None = None) -> str:
    """The page for ``data`` (:func:`~cassettes.views.report.report_data`). ``compress``:
    ``None`` decides by size, ``True`` / ``False`` force it (tests)."""
    script = _asset("uPlot.iife.min.js") + "\n" + _asset("page.js")
    style = _asset("uPlot.min.css") + "\n" + _asset("page.css")
    csp = (
        f"default-src 'none'; script-src {_hash(script)}; style-src {_hash(style)}; "
        "img-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'none'"
    )
    return _render(
        "page.html.j2",
        "export --html",
        csp=csp,
        name=data.get("name", "run"),
        round_trips=count(data.get("round_trips", 0), "round trip"),
        style=style,
        script=script,
        data=_payload(data, compress),
    )
