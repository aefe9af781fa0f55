"""An ``--edit`` whose value its kind cannot use is refused when read, in one line that says what
the edit wants (``max_tokens`` 1 to 2^31-1, ``continue`` 1 to MAX_CONTINUE, ``tool_schema`` a JSON
object); any other kind takes any text."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from looptap.cassettes.errors import CassetteError
from looptap.cassettes.replay.forking.fork import start_fork
from looptap.cassettes.replay.live.edits import MAX_CONTINUE, EditError, parse_edit, parse_edits
from tests.replay.conftest import tool_loop, write
from tests.support import progress
from tests.support.recorder import clean_env

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


SELECTOR = (
    "--edit 'turn=2:system=x': an edit applies from the fork's cursor (turn=1) on; its selector, "
    "if given, is the cursor's"
)


def test_an_edit_whose_selector_is_not_the_cursor_is_refused() -> None:
    """An edit applies from the fork's cursor on: a selector written before its target must be
    the cursor's (or none). One rule for ``looptap replay --cursor``, ``looptap run --from`` and
    the pytest marker's ``fork=`` (only the marker's words differ: ``edit``, not ``--edit``)."""
    assert [e.selector for e in parse_edits(["turn=1:system=x", "user[0]=y"], "turn=1")] == [
        "turn=1",
        None,
    ]
    with pytest.raises(EditError) as caught:
        parse_edits(["system=y", "turn=2:system=x"], "turn=1")
    assert str(caught.value) == SELECTOR
    with pytest.raises(EditError) as caught:
        parse_edits(["turn=2:system=x"], "turn=1", "edit")
    assert str(caught.value) == SELECTOR.removeprefix("--")


def test_replay_and_run_from_refuse_an_edit_at_another_selector_in_one_line(
    tmp_path: Path,
) -> None:
    run = write(tmp_path / "run.jsonl", tool_loop())
    argv = [sys.executable, "-m", "looptap.cassettes.cli", "replay", str(run), "--cursor", "turn=1"]
    argv += ["--live", "openai=http://127.0.0.1:9", "--edit", "turn=2:system=x"]
    proc = progress.run(argv, capture_output=True, text=True, env=clean_env())
    assert proc.returncode == 2 and proc.stderr == f"looptap: error: {SELECTOR}\n", proc.stderr
    args = SimpleNamespace(from_run=f"{run}@turn=1", edit=["turn=2:system=x"])
    with pytest.raises(CassetteError) as caught:
        start_fork(args)
    assert str(caught.value) == SELECTOR
