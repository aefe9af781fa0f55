"""Tool arguments that plainly satisfy a plain tool schema, told without jsonschema.

Checking a call's arguments against its tool's JSON Schema (``tool_schema.schema_errors``) needs
``jsonschema``, whose import (with ``referencing``, ``attrs``, ``rpds`` and the dialects'
meta-schemas) is about half of what ``looptap show`` of a small run spends after its own imports.
Most schemas tools declare use a few keywords, and most calls satisfy them: :func:`surely_valid`
answers ``True`` only when it can tell, with jsonschema's semantics, that the arguments are valid
under the schema, and ``False`` ("cannot tell") otherwise, so the caller asks jsonschema as before.
A ``True`` changes nothing a reader sees: jsonschema would have found no violation either (and an
invalid schema, which jsonschema does not check against, gives no violation both ways).

Understood, for a schema without ``$schema`` (jsonschema's default dialect, 2020-12):
``type`` (a name or a list of names), ``properties``, ``required``, ``additionalProperties``
(a boolean or a schema), ``items`` (one schema), ``enum`` (of strings, integers, booleans,
null), and the keywords that assert nothing (``description``, ``title``, ``default``,
``examples``, ``format``, which jsonschema only annotates without a format checker, …). Any other
keyword, a number where an integer is asked, a nesting deeper than :data:`DEPTH`: "cannot tell".
"""

from __future__ import annotations

from typing import Any

__all__ = ["surely_valid"]

#: Deeper schemas or arguments are left to jsonschema.
DEPTH = 32

#: Keywords that assert nothing about an instance (annotations; ``nullable`` is the OpenAPI
#: marker ``tool_schema.normalise_schema`` has already turned into a ``null`` type).
_NEUTRAL = frozenset(
    {
        "description",
        "title",
        "default",
        "examples",
        "format",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "nullable",
    }
)
_KNOWN = _NEUTRAL | {"type", "properties", "required", "additionalProperties", "items", "enum"}
_SCALAR = (str, int, bool, type(None))


def _is(value: Any, name: Any) -> bool | None:
    """Whether ``value`` is of the JSON type ``name``; ``None`` where it cannot tell."""
    t = type(value)
    if name == "string":
        return t is str
    if name == "object":
        return t is dict
    if name == "array":
        return t is list
    if name == "boolean":
        return t is bool
    if name == "null":
        return value is None
    if name == "integer":
        return True if t is int else (None if t is float else False)  # 1.0 is an integer to 2020-12
    if name == "number":
        return t is int or t is float
    return None  # not a type name jsonschema knows: its own error


def _type_ok(value: Any, schema: dict[str, Any]) -> bool:
    if "type" not in schema:
        return True
    names = schema["type"] if type(schema["type"]) is list else [schema["type"]]
    return True in (_is(value, n) for n in names)


def _enum_ok(value: Any, schema: dict[str, Any]) -> bool:
    if "enum" not in schema:
        return True
    enum = schema["enum"]
    return (
        type(enum) is list
        and type(value) in _SCALAR
        and any(type(e) is type(value) and e == value for e in enum)
    )


def _valid(value: Any, schema: Any, depth: int) -> bool:
    if schema is True or (type(schema) is dict and not schema):
        return True
    if type(schema) is not dict or depth > DEPTH or not _KNOWN.issuperset(schema):
        return False
    if not _type_ok(value, schema) or not _enum_ok(value, schema):
        return False
    if type(value) is dict:
        return _object(value, schema, depth)
    if type(value) is list and "items" in schema:
        items = schema["items"]
        return type(items) is dict and all(_valid(v, items, depth + 1) for v in value)
    return True


def _object(value: dict[str, Any], schema: dict[str, Any], depth: int) -> bool:
    props = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if (
        type(props) is not dict
        or type(required) is not list
        or not all(type(r) is str for r in required)
    ):
        return False
    if any(r not in value for r in required):
        return False
    for key, v in value.items():
        sub = props.get(key, extra)
        if sub is False or not _valid(v, sub, depth + 1):
            return False
    return True


def surely_valid(arguments: Any, schema: Any) -> bool:
    """``True`` when ``arguments`` certainly satisfy ``schema`` (a normalised tool schema) as
    jsonschema's default dialect reads it; ``False`` when that cannot be told here."""
    if type(schema) is dict and "$schema" in schema:
        return False  # another dialect may read the same keywords otherwise
    return _valid(arguments, schema, 0)
