"""``A.model_mismatch`` (:mod:`cassettes.analysis.codes`): is the model that served a call
the one the request asked for, by the names' core (:func:`same_model`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from . import codes as codes
from ._context import TurnContext
from ._model import Finding
from ._price_data import known_model

__all__ = ["check_model_mismatch", "same_model"]

_DATE = re.compile(r"(?:[-_@]?20\d{2}-?[01]\d-?[0-3]\d)(?=$|[-_:.@])")
_SUFFIX = re.compile(
    r"(?:[-:@](?:latest|free|beta))$|(?:-v\d+(?::\d+)?)$|"
    r"(?::\d+)$|(?<=\d)[-.]0$|-(?:0[1-9]|1[0-2])[0-3]\d$"
)
_ALPHA_PREFIX = re.compile(r"^(?:[a-z]+(?:-[a-z]+)*\.)+(?=[a-z])")


def _core(model: str) -> str:
    """A model name stripped of what does not change the model: path and region/vendor prefixes,
    dated snapshots, ``latest``/``free`` tags and version suffixes."""
    m = model.strip().lower()
    m = m.rsplit("/", 1)[-1]
    m = _ALPHA_PREFIX.sub("", m)
    for _ in range(3):
        prev = m
        m = _SUFFIX.sub("", m)
        m = _DATE.sub("", m)
        if m == prev:
            break
    return m.strip("-_:.@")


def _tokens(core: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+", core) if t]


def same_model(requested: str, served: str) -> bool:
    """True when ``served`` is ``requested`` or a snapshot/alias spelling of it."""
    a, b = _core(requested), _core(served)
    if a == b:
        return True
    ta, tb = _tokens(a), _tokens(b)
    return "".join(ta) == "".join(tb) or sorted(ta) == sorted(tb)


def _family(core: str) -> str:
    m = re.match(r"[a-z]+", core)
    return m.group(0) if m else core


def _deployment(url: str) -> str | None:
    """Azure OpenAI's ``/openai/deployments/NAME/…``: the body's ``model`` is that deployment name
    (the SDK copies it there), not a model; the deployment's model is what serves."""
    m = re.search(r"/deployments/([^/?#]+)/", url)
    return m.group(1) if m else None


def _not_swapped(ctx: TurnContext, req: str, served: str) -> bool:
    """The served name is the requested model itself: the same model, an ARN, or an Azure
    deployment (it serves the model it was created with: nothing was swapped)."""
    return (
        req.lower().startswith("arn:")
        or same_model(req, served)
        or _deployment(ctx.rt.url) in (req, req.rsplit("/", 1)[-1])
    )


def _listed_fallback(body: object, served: str) -> bool:
    """A fallback list in the request (``"models": [...]``) names the served model: expected."""
    return isinstance(body, dict) and any(
        isinstance(v, list) and any(isinstance(x, str) and same_model(x, served) for x in v)
        for v in body.values()
    )


def _mismatch_how(req: str, known_req: str | None, *, fallback: bool, warn: bool) -> str:
    """The end of the model-mismatch sentence: why the served model differs, as far as is known."""
    if fallback:
        return ", one of the fallback models the request listed."
    if warn:
        return f": a different model answered ({known_req or req} was asked for)."
    if known_req is None:
        return (
            f" (`{req}` is not a published model name: an alias, "
            "a deployment or a router resolved it)."
        )
    return " (an alias or a routed variant)."


def check_model_mismatch(ctx: TurnContext) -> Iterator[Finding]:
    a = ctx.turn.a
    req, served = a.model_requested, a.model_served
    if not req or not served or _not_swapped(ctx, req, served):
        return
    seen: set[tuple[str, str]] = ctx.conv.state.setdefault(codes.MODEL_MISMATCH, set())
    if (req, served) in seen:
        return
    seen.add((req, served))
    known_req, known_served = known_model(req), known_model(served)
    if known_req is not None and known_req == known_served:
        return  # two spellings of one published model (an alias, a snapshot, a vendor prefix)
    body = ctx.ex.request_json()
    named_in_body = isinstance(body, dict) and body.get("model") == req
    fallback = _listed_fallback(body, served)
    # Warn only when the request named a published model and a model of another family answered.
    # A name that is no published model (a gateway alias such as LiteLLM's, a router such as
    # ``openrouter/auto``, a deployment) is expected to resolve to something else; and a vendor's
    # own aliases move within the family (``deepseek-reasoner`` served by ``deepseek-v4-flash``).
    warn = (
        known_req is not None
        and _family(_core(req)) != _family(_core(served))
        and named_in_body
        and not fallback
    )
    how = _mismatch_how(req, known_req, fallback=fallback, warn=warn)
    yield ctx.finding(
        codes.MODEL_MISMATCH,
        f"The request asked for `{req}` but `{served}` served it{how}",
        grade="other family" if warn else None,
        requested=req,
        served=served,
        fallback=fallback,
    )
