"""A tool call's arguments checked against the tool's JSON Schema (the E layer's schema check).

Validated with ``jsonschema``: the schema's own ``$schema`` draft or 2020-12 by default, formats
not asserted; Gemini's OpenAPI-subset schemas with upper-case ``"OBJECT"``/``"STRING"`` types are
lower-cased first; a schema that is itself invalid is simply not checked. Arguments that plainly
satisfy a plain schema are told valid without loading jsonschema (:mod:`plain_schema`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from ..wire import REDACTED
from ._context import clipped
from ._plain_schema import surely_valid

if TYPE_CHECKING:
    from jsonschema.protocols import Validator  # type: ignore[import-untyped]

__all__ = ["normalise_schema", "schema_errors"]

#: Schema violations listed per call (the rest are counted).
_MAX_SCHEMA_ERRORS = 10


def normalise_schema(schema: Any) -> Any:
    """OpenAPI-subset schemas (Gemini) → JSON Schema: lower-case ``type``, ``nullable`` → null
    allowed."""
    if isinstance(schema, list):
        return [normalise_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for k, v in schema.items():
        if k == "type" and isinstance(v, str):
            out[k] = v.lower()
        elif k == "type" and isinstance(v, list):
            out[k] = [t.lower() if isinstance(t, str) else t for t in v]
        elif k in ("properties", "$defs", "definitions", "patternProperties") and isinstance(
            v, dict
        ):
            out[k] = {name: normalise_schema(sub) for name, sub in v.items()}
        elif k in ("enum", "const", "default", "example", "examples", "required"):
            out[k] = v
        else:
            out[k] = normalise_schema(v)
    if out.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    return out


_VALIDATORS: dict[bytes, Validator | None] = {}


def _validator(schema: dict[str, Any]) -> Validator | None:
    """A compiled validator for ``schema`` (cached: the same tools are re-sent every turn)."""
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None
    if key in _VALIDATORS:
        return _VALIDATORS[key]
    # Here, not at the top: jsonschema (with referencing, attrs, rpds) is loaded when the first
    # schema is checked, not by every command that imports the analysis.
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]

    v: Validator | None
    try:
        norm = normalise_schema(schema)
        cls = validator_for(norm, default=Draft202012Validator)
        cls.check_schema(norm)
        v = cls(norm)
    except (SchemaError, Exception):  # an invalid or exotic schema is simply not checked
        v = None
    if len(_VALIDATORS) > 4096:
        _VALIDATORS.clear()
    _VALIDATORS[key] = v
    return v


def _describe(err: Any) -> str:
    """One violation as ``$.path: what is wrong``, worded for the three common cases."""
    path = getattr(err, "json_path", "$")
    v = err.validator
    if v == "required":
        missing = [
            r
            for r in err.validator_value
            if isinstance(err.instance, dict) and r not in err.instance
        ]
        return (
            f"{path}: missing required property "
            f"{', '.join(repr(m) for m in missing) or err.message}"
        )
    if v == "type":
        return f"{path}: {clipped(err.instance)} is not of type {clipped(err.validator_value)}"
    if v == "enum":
        return f"{path}: {clipped(err.instance)} is not one of {clipped(err.validator_value, 120)}"
    return f"{path}: {err.message if len(err.message) <= 160 else err.message[:159] + '…'}"


def schema_errors(arguments: Any, schema: dict[str, Any] | None) -> list[str]:
    """Violations of ``schema`` by ``arguments``, each ``$.path: reason``; [] when it cannot
    check."""
    if schema is None:
        return []
    if surely_valid(arguments, normalise_schema(schema)):
        # what jsonschema would say, without loading it (cassettes/analysis/_plain_schema.py)
        return []
    v = _validator(schema)
    if v is None:
        return []
    try:
        errors = sorted(
            # a value the recorder masked is not the model's: not judged (docs/redaction.md)
            (e for e in v.iter_errors(arguments) if e.instance != REDACTED),
            key=lambda e: (list(map(str, e.absolute_path)), e.validator),
        )
    except Exception:  # unresolvable $ref, recursion … — not checked
        return []
    out = [_describe(e) for e in errors[:_MAX_SCHEMA_ERRORS]]
    if len(errors) > _MAX_SCHEMA_ERRORS:
        out.append(f"… and {len(errors) - _MAX_SCHEMA_ERRORS} more")
    return out
