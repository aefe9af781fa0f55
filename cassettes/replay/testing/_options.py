"""What the ``looptap`` marker, the command line and the ini file ask of one test: its cassette,
record mode, pace, faults, a fork's cursor, the volatile detectors and the rules (:class:`Options`),
each checked before anything starts (a value that cannot be used fails the test, or the session,
in one line).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ...matching import project_rules
from ...project import RuleError
from ...storage import UnsafePath, check_target, is_cassette
from ..serving.faults import FaultPlan, FaultSpecError, parse_fault
from ..serving.server import parse_pace
from ._keys import MODES

__all__ = ["Options", "upstreams"]


@dataclass
class Options:
    """What the marker and the command line ask of one test's cassette."""

    mode: str
    path: Path
    pace: str
    strict: bool
    plan: Any
    replay: bool
    record: bool
    #: ``fork=``: the cursor past which requests go live (``None``: all replayed).
    cursor: Any = None
    #: Volatile spans tolerated when matching (marker ``volatile=``, else ``--looptap-no-volatile``,
    #: else the ini).
    volatile: bool = True
    #: The user rules (the project's file, the ini's, the marker's: :func:`_rules`).
    rules: Any = None

    @classmethod
    def of(cls, item: pytest.Item, config: pytest.Config, marker: pytest.Mark | None) -> Options:
        kw = marker.kwargs if marker else {}
        mode = _record_mode(config, marker)
        given = (marker.args[0] if marker and marker.args else None) or kw.get("path")
        path = (item.path.parent / given) if given else _default_path(item)
        pace = _pace(kw, config)
        strict = bool(kw.get("strict") or config.getoption("--looptap-strict"))
        plan = _fault_plan(marker)
        exists = path.exists() and path.stat().st_size > 0
        if mode == "none" and not exists:
            pytest.fail(
                f"looptap: no cassette at {path} and the record mode is 'none'; record it with "
                "--looptap-record-mode=once",
                pytrace=False,
            )
        replay = exists and mode in ("none", "once", "new_episodes")
        record = mode == "all" or (mode == "once" and not exists) or mode == "new_episodes"
        if plan is not None and not replay:
            pytest.fail(
                f"looptap: faults are injected into a replayed run, and {path} is being recorded "
                f"(mode {mode}); record it first",
                pytrace=False,
            )
        if record:
            _check_recordable(path, mode)
        rules = _rules(kw, config, path)
        return cls(
            mode,
            path,
            pace,
            strict,
            plan,
            replay,
            record,
            _fork_cursor(marker, item.path.parent),
            _volatile(kw, config, rules.volatile),
            rules,
        )


def _record_mode(config: pytest.Config, marker: pytest.Mark | None) -> str:
    mode = (
        (marker.kwargs.get("record_mode") if marker else None)
        or config.getoption("--looptap-record-mode")
        or config.getini("looptap_record_mode")
    )
    if not mode:
        mode = "none" if os.environ.get("CI") else "once"
    if mode not in MODES:
        raise pytest.UsageError(
            f"looptap: record mode must be one of {', '.join(MODES)}, not {mode!r}"
        )
    return str(mode)


def _default_path(item: pytest.Item) -> Path:
    name = re.sub(r"[^\w.\-\[\]]+", "_", item.name)
    return item.path.parent / "cassettes" / item.path.stem / f"{name}.jsonl"


def _volatile(kw: Mapping[str, Any], config: pytest.Config, table: bool | None = None) -> bool:
    """Whether the replay tolerates volatile spans: the marker's ``volatile=`` if given, else
    off with ``--looptap-no-volatile``, else the ``looptap_volatile`` ini value (on by default),
    else the project's ``[tool.looptap] volatile``."""
    if kw.get("volatile") is not None:
        return bool(kw["volatile"])
    if config.getoption("--looptap-no-volatile"):
        return False
    return bool(config.getini("looptap_volatile")) and table is not False


def _rules(kw: Mapping[str, Any], config: pytest.Config, cassette: Path) -> Any:
    """The rules of one test: the project's file for its cassette, the ini's and the marker's
    ``ignore=``, ``substitute=`` and ``volatile_tools=`` (each one string or a list)."""

    def listed(name: str) -> list[str]:
        v = kw.get(name)
        return [] if v is None else [v] if isinstance(v, str) else [str(x) for x in v]

    why = None
    try:
        return project_rules(
            cassette,
            [*config.getini("looptap_ignore"), *listed("ignore")],
            [*config.getini("looptap_substitute"), *listed("substitute")],
            [*config.getini("looptap_volatile_tools"), *listed("volatile_tools")],
            "pytest's ini and marker",
        )
    except (RuleError, TypeError) as exc:
        why = str(exc)
    pytest.fail(f"looptap: {why}", pytrace=False)


def _pace(kw: Mapping[str, Any], config: pytest.Config) -> str:
    """The replay pace the marker or the command line asks for (``instant`` by default), checked."""
    pace: str = kw.get("pace") or config.getoption("--looptap-pace") or "instant"
    try:
        parse_pace(pace)
    except ValueError as exc:
        raise pytest.UsageError(f"looptap: {exc}") from None
    return pace


def _fault_plan(marker: pytest.Mark | None) -> FaultPlan | None:
    """The marker's ``fault=`` (one spec or a list) and ``fault_seed=``, read."""
    given = marker.kwargs.get("fault") if marker is not None else None
    if not given:
        return None

    specs = [given] if isinstance(given, str) else list(given)
    try:
        return FaultPlan(
            [parse_fault(str(f)) for f in specs],
            seed=int(marker.kwargs.get("fault_seed", 0)) if marker is not None else 0,
        )
    except (FaultSpecError, ValueError) as exc:
        raise pytest.UsageError(f"looptap: {exc}") from None


def _fork_cursor(marker: pytest.Mark | None, base: Path | None = None) -> Any:
    """The marker's ``fork=`` cursor, with ``live=`` ({API name: base URL}), ``model=`` and
    ``edit=`` (one ``TARGET=@FILE``/``TARGET=text`` or a list; a file relative to ``base``, the
    test's directory): the options of ``looptap run --from`` (docs/fork.md). A value that cannot
    be used fails the test in one line, before the replay starts."""
    kw = marker.kwargs if marker is not None else {}
    given = kw.get("fork")
    if not given:
        if (
            kw.get("model") is not None
            or kw.get("edit")
            or kw.get("live")
            or kw.get("prefix") is not None
        ):
            pytest.fail(
                "looptap: model=, edit=, live= and prefix= go with "
                "fork='turn=N' (where the cassette goes live)",
                pytrace=False,
            )
        return None
    from ..forking.cursor import Cursor, live_router
    from ..forking.placement import CursorError, parse_cursor
    from ..live.edits import EditError, parse_edits

    live, model, edits, prefix = _fork_options(kw)
    try:
        spec = parse_cursor(given)
        given_edits = [str(e) for e in ([edits] if isinstance(edits, str) else edits)]
        parsed = parse_edits(given_edits, spec.text, "edit", base)
    except (CursorError, EditError) as exc:
        pytest.fail(f"looptap: {exc}", pytrace=False)
    return Cursor(
        spec,
        live_router({str(k).lower(): str(v).rstrip("/") for k, v in live.items()}),
        model=model,
        edits=parsed,
        prefix=prefix,
    )


def _fork_options(
    kw: Mapping[str, Any],
) -> tuple[dict[Any, Any], str | None, str | list[Any] | tuple[Any, ...], str]:
    """The marker's ``live=``, ``model=``, ``edit=`` and ``prefix=`` beside its ``fork=``, each
    checked: a value that cannot be used fails the test in one line."""
    live = kw.get("live") or {}
    if (
        not isinstance(live, dict)
        or not live
        or not all(
            isinstance(v, str) and v.startswith(("http://", "https://")) for v in live.values()
        )
    ):
        pytest.fail(
            "looptap: fork= needs live={NAME: 'http(s)://host[:port]'} (NAME as --looptap-upstream "
            "names an API: where requests past the cursor go)",
            pytrace=False,
        )
    model = kw.get("model")
    edits = kw.get("edit") or []
    prefix = kw.get("prefix") or "strict"
    if prefix not in ("strict", "tolerant"):
        pytest.fail(
            f"looptap: prefix= is 'strict' (the default) or 'tolerant', not {str(prefix)[:40]!r}",
            pytrace=False,
        )
    if (
        not isinstance(kw.get("fork"), str)
        or (model is not None and not isinstance(model, str))
        or not isinstance(edits, (str, list, tuple))
    ):
        pytest.fail(
            "looptap: fork= is a cursor such as 'turn=1', model= a model name, edit= "
            "'TARGET=@FILE' or a list of them",
            pytrace=False,
        )
    return live, model, edits, str(prefix)


def _check_recordable(path: Path, mode: str) -> None:
    """Checked before the test runs: only a cassette (or nothing) is written over."""
    refused = None
    try:
        check_target(
            path,
            "the test's cassette",
            owned=is_cassette,
            hint="give the marker another path",
            parents=True,
        )
    except UnsafePath as exc:
        refused = str(exc)
    if refused is not None:
        pytest.fail(f"looptap: cannot record (mode {mode}): {refused}", pytrace=False)


def upstreams(config: pytest.Config) -> dict[str, str]:
    """``--looptap-upstream NAME=URL``, read as ``looptap record --upstream`` reads it (one
    usage error line for an item of another form, before the recorder starts)."""
    from ..live.upstreams import bases_of  # (only a session that records reads it)

    try:
        return bases_of(config.getoption("--looptap-upstream") or [], "--looptap-upstream")
    except ValueError as exc:
        raise pytest.UsageError(f"looptap: {exc}") from None
