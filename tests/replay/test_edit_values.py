"""An ``--edit`` whose value its kind cannot use is refused when read, in one line that says what
the edit wants (``max_tokens`` 1 to 2^31-1, ``continue`` 1 to MAX_CONTINUE, ``tool_schema`` a JSON
object); any other kind takes any text."""

from __future__ import annotations

import pytest

from cassettes.replay.live import MAX_CONTINUE, EditError, parse_edit

WANTS = {
    "max_tokens": "max_tokens wants a positive number of tokens",
    "continue": "continue wants the most continuation requests per cut answer, "
    f"1 to {MAX_CONTINUE}",
    "tool_schema[lookup]": "tool_schema wants a JSON object (a schema)",
}


@pytest.mark.parametrize(
    ("target", "value"),
    [
        ("max_tokens", "0"),
        ("max_tokens", str(1 << 31)),
        ("max_tokens", "-5"),
        ("max_tokens", "many"),
        ("continue", "0"),
        ("continue", str(MAX_CONTINUE + 1)),
        ("tool_schema[lookup]", "[1, 2]"),
        ("tool_schema[lookup]", "{not json"),
    ],
)
def test_a_value_its_kind_cannot_use_is_refused_saying_what_it_wants(
    target: str, value: str
) -> None:
    spec = f"{target}={value}"
    with pytest.raises(EditError) as caught:
        parse_edit(spec)
    assert str(caught.value) == f"--edit {spec!r}: {WANTS[target]}"


@pytest.mark.parametrize(
    ("spec", "kept"),
    [
        ("max_tokens= 1 ", "1"),
        (f"max_tokens={(1 << 31) - 1}", str((1 << 31) - 1)),
        (f"continue={MAX_CONTINUE}", str(MAX_CONTINUE)),
        ('tool_schema[lookup]={"type": "object"}', '{"type": "object"}'),
        ("system= any text, kept as it is ", " any text, kept as it is "),
        ("user[0]=", ""),
    ],
)
def test_a_value_its_kind_can_use_is_kept(spec: str, kept: str) -> None:
    assert parse_edit(spec).value == kept
