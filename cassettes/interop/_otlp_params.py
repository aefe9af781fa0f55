"""The request's parameters and its stream flag, as a span kept them: the semconv's
``gen_ai.request.*`` (sampling parameters only), OpenInference's ``llm.invocation_parameters``
(the request's own, where a framework's settings ride along: only the API's parameters are kept,
never a ``null``), and the stream flag wherever an instrumentation put it. What a span cannot say
is marked inferred (``params``, ``stream``, ``max_tokens name``)."""

from __future__ import annotations

from typing import Any

from ..providers import REQUEST_FIELDS, Call, shape_of
from . import _genai_names as genai
from ._otlp_openinference import response_echo
from ._otlp_profiles import Instrumentation
from ._otlp_spans import json_attribute

__all__ = ["params"]

#: The ``gen_ai.request.*`` parameters put back in a request, each under the first of its names
#: (``providers.REQUEST_FIELDS``) the family's API takes (its profile's ``rebuild.param_name``).
_PARAMS = (
    "max_tokens temperature top_p top_k frequency_penalty presence_penalty seed stop_sequences"
)


def params(call: Call, a: dict[str, Any], span: dict[str, Any], prof: Instrumentation) -> None:
    """The sampling parameters and the stream flag the trace kept, put back in the request: the
    API's own parameters only (a ``null`` is a parameter not sent, and so is a value the
    instrumentation writes as its default), the stream flag from any evidence of ``prof``'s."""
    invoked = _invoked(a)
    # looptap's own export keeps the request's parameters as sent, every one the API's own
    shape = shape_of(call.family)
    known = shape.api_params if a.get(genai.FAMILY) is None else None
    call.params = {
        k: v
        for k, v in (invoked or {}).items()
        if v is not None and not k.startswith("_") and (known is None or k in known)
        and k not in ("model", "messages", "tools", "stream", "streaming")
    }  # fmt: skip
    _sampling(call, a, prof)
    _stream(call, a, span, prof, invoked)
    if call.params:
        call.given.add("params")
    if invoked is None:
        call.inferred.add("params")  # only some parameters are on a semconv span


def _invoked(a: dict[str, Any]) -> dict[str, Any] | None:
    """The request's own parameters, where the span keeps them: OpenInference's (traceAI's under
    the conventions' name); not openai-agents' answer's echo of them, defaults and all."""
    invoked = json_attribute(a.get(genai.INVOCATION_PARAMETERS, a.get(genai.REQUEST_PARAMETERS)))
    if response_echo(a) is not None:
        return None
    return invoked if isinstance(invoked, dict) else None


def _sampling(call: Call, a: dict[str, Any], prof: Instrumentation) -> None:
    """The semconv's ``gen_ai.request.*`` parameters the request's own did not say, by the
    family's names, but an instrumentation's default for a parameter not sent."""
    shape = shape_of(call.family)
    for name in _PARAMS.split():
        value = a.get(genai.REQUEST_PARAMETER.format(name))
        key = shape.param_name(REQUEST_FIELDS[name])
        said = any(k in call.params for k in REQUEST_FIELDS[name])  # the request's own, as sent
        if _default(value, prof.defaults.get(name, ())):
            continue  # its default for a parameter not sent (or sent as that): not said
        if value is not None and key is not None and not said:
            call.params[key] = value
            if key in shape.unsure_names:
                call.inferred.add(shape.unsure_names[key])


def _stream(
    call: Call,
    a: dict[str, Any],
    span: dict[str, Any],
    prof: Instrumentation,
    invoked: dict[str, Any] | None,
) -> None:
    """The stream flag, from any evidence of ``prof``'s; inferred where the trace does not say."""
    given = invoked is not None
    invoked = invoked or {}
    setting = (invoked.get("stream"), invoked.get("streaming"))  # (LangChain's: the model's)
    stream_span = prof.stream_span
    flags = (
        a.get(genai.STREAM),  # the semconv's, the anthropic SDK's own span
        a.get("gen_ai.is_streaming"),  # openllmetry, OpenLIT
        a.get("llm.is_streaming"),
        *(f for f in setting if f is True or not prof.stream_flag_is_a_setting),
        True if str(span.get("name") or "").endswith(".converse_stream") else None,  # OI bedrock
        True if stream_span and str(a.get(stream_span[0]) or "").startswith(stream_span[1])
        else None,
    )  # fmt: skip
    call.stream = any(f is True for f in flags)
    said = (given and not prof.stream_flag_is_a_setting) or prof.says_stream
    if not call.stream and all(f is None for f in flags) and not said:
        call.inferred.add("stream")  # the trace does not say (pydantic-ai, OTel contrib openai-v2)
    if not call.stream:
        call.params.pop("stream_options", None)


def _default(value: Any, defaults: tuple[Any, ...]) -> bool:
    """``value`` is one an instrumentation writes when the request had none (``1`` and ``1.0``
    the same, a list of one default the default)."""
    if isinstance(value, list | tuple) and len(value) <= 1:
        value = value[0] if value else []
    return any(value == d and type(value) is not bool for d in defaults)
