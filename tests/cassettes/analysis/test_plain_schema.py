"""plain_schema.surely_valid never says "valid" where jsonschema finds a violation, and says it
for the plain schemas tools declare, so ``schema_errors`` gives what jsonschema gives."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for

from looptap.cassettes.analysis import normalise_schema, schema_errors, surely_valid

NAMES = ["string", "integer", "number", "boolean", "null", "object", "array", "bogus"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([1.0, 2.5, -0.0])
    | st.sampled_from(["a", "b", ""]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)
    ),
    max_leaves=8,
)


def _schemas(exotic: bool) -> st.SearchStrategy[Any]:
    """Schemas of the keywords plain_schema reads; with ``exotic``, also ones it must leave to
    jsonschema (``minimum``, ``anyOf``, an ``items`` list, another dialect, a misspelt type)."""
    odd: dict[str, st.SearchStrategy[Any]] = (
        {"minimum": st.integers(-1, 1), "Type": st.just("STRING")} if exotic else {}
    )
    leaf = (
        st.fixed_dictionaries(
            {},
            optional={
                "type": st.sampled_from(NAMES)
                | st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),
                "enum": st.lists(
                    st.none()
                    | st.booleans()
                    | st.integers(-2, 2)
                    | st.sampled_from(["a", "b", 1.0]),
                    max_size=3,
                ),
                "description": st.just("d"),
                "format": st.sampled_from(["date-time", "email"]),
                "nullable": st.booleans(),
                **odd,
            },
        )
        | st.booleans()
    )
    more: dict[str, st.SearchStrategy[Any]] = (
        {
            "anyOf": st.lists(leaf, min_size=1, max_size=2),
            "$schema": st.just("http://json-schema.org/draft-04/schema#"),
        }
        if exotic
        else {}
    )
    return st.recursive(
        leaf,
        lambda inner: st.fixed_dictionaries(
            {},
            optional={
                "type": st.sampled_from(NAMES),
                "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
                "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=3) | st.just("a"),
                "additionalProperties": st.booleans() | inner,
                "items": inner | st.lists(inner, max_size=2),
                **more,
            },
        ),
        max_leaves=6,
    )


def _jsonschema_errors(arguments: Any, schema: Any) -> list[str] | None:
    """jsonschema's violations, ``None`` where it checks nothing (an invalid schema, a raise)."""
    norm = normalise_schema(schema)
    try:
        cls = validator_for(norm, default=Draft202012Validator)
        cls.check_schema(norm)
        return [e.message for e in cls(norm).iter_errors(arguments)]
    except Exception:
        return None


def _agrees(schema: Any, arguments: Any) -> None:
    if surely_valid(arguments, normalise_schema(schema)):
        assert not _jsonschema_errors(arguments, schema), (schema, arguments)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_schemas(exotic=False), json_values)
def test_surely_valid_only_where_jsonschema_finds_nothing(schema: Any, arguments: Any) -> None:
    _agrees(schema, arguments)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_schemas(exotic=True), json_values)
def test_keywords_it_does_not_read_are_left_to_jsonschema(schema: Any, arguments: Any) -> None:
    _agrees(schema, arguments)


WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "a city"},
        "days": {"type": "integer"},
        "unit": {"type": "string", "enum": ["c", "f"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["city"],
    "additionalProperties": False,
}


def test_plain_schemas_are_told_without_jsonschema() -> None:
    assert surely_valid({"city": "Paris"}, WEATHER)
    assert surely_valid({"city": "Paris", "days": 3, "unit": "c", "tags": ["a"]}, WEATHER)
    assert surely_valid({"anything": [1, {"x": None}]}, {"type": "object"})
    # Gemini's
    assert surely_valid(
        {"q": "x"},
        normalise_schema(
            {"type": "OBJECT", "properties": {"q": {"type": "STRING", "nullable": True}}}
        ),
    )


#: Each a violation jsonschema reports, of a keyword plain_schema reads: it must not say "valid".
VIOLATIONS = [
    ({"required": ["a"]}, {}),
    ({"type": "integer"}, 2.5),
    ({"type": "integer"}, True),
    ({"type": "number"}, False),
    ({"type": ["string", "null"]}, 1),
    ({"enum": [1, "a"]}, True),
    ({"enum": [True]}, 1),
    ({"properties": {"a": {"type": "string"}}, "additionalProperties": False}, {"a": "x", "b": 1}),
    ({"additionalProperties": {"type": "integer"}}, {"b": "x"}),
    ({"properties": {"a": False}}, {"a": 1}),
    ({"items": {"type": "string"}}, ["a", 2]),
    ({"properties": {"a": {"properties": {"b": {"required": ["c"]}}}}}, {"a": {"b": {}}}),
]


def test_no_violation_is_called_valid() -> None:
    for schema, arguments in VIOLATIONS:
        assert _jsonschema_errors(arguments, schema), (schema, arguments)
        assert not surely_valid(arguments, schema), (schema, arguments)


def test_what_it_cannot_tell_goes_to_jsonschema() -> None:
    """Each of these is either a violation or outside the subset: jsonschema decides, and its
    words reach the finding as before."""
    for args in (
        {},
        {"city": 5},
        {"city": "Paris", "extra": 1},
        {"city": "Paris", "unit": "k"},
        {"city": "Paris", "days": 3.0},
        {"city": "P", "tags": [1]},
    ):
        assert not surely_valid(args, WEATHER), args
    assert not surely_valid(
        {"a": 1}, {"type": "object", "properties": {"a": {"anyOf": [{"type": "integer"}]}}}
    )
    assert not surely_valid(
        {"a": 1}, {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"}
    )
    assert schema_errors({}, WEATHER) == ["$: missing required property 'city'"]
    assert schema_errors({"city": 5}, WEATHER) == ["$.city: 5 is not of type \"string\""]
    assert schema_errors({"city": "Paris"}, WEATHER) == []
