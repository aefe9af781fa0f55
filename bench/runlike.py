"""How many public classes and entry points a reader of a run meets (issue 30: "a run is eleven
    classes").

    python bench/runlike.py [REPO]          # this tree, or another checkout (an older commit's worktree)
    python bench/runlike.py --all [REPO]    # every class holding round trips, private ones included

Public = named in ``cassettes.__all__`` or in the ``__all__`` of a module under ``cassettes/``.
Run-like = a public class that holds or reads a run's round trips, turns or conversations: it has
(as an attribute, a property, a method or a model field) one of :data:`MARKS`. An entry point = a
public function whose return annotation names a run-like class. Printed one per line, then the
counts, so two trees can be compared line by line.

``--all`` (issue 47: "one record source"): every class defined under ``cassettes/`` or
``inspector/``, public or not, that holds or reads a run's round trips, i.e. carries one of
:data:`ROUND_TRIPS` (or reads a cassette's records itself), protocols listed apart; marked ``wraps
index`` when its own code builds a
:class:`~cassettes.storage.RecordIndex` or ``RequestBodies`` (reads a cassette's records
itself rather than through another class), and ``zip`` counts ``zip(<x>.roundtrips,
<x>.exchanges)`` (either order) in the tree's code and tests.
"""  # noqa: E501

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

#: What a run-like class carries: the round trips, their exchanges, the turns or conversations of
#: a run, a way to one round trip by seq or position, or a step through a growing file.
MARKS = (
    "exchanges",
    "roundtrips",
    "round_trips",
    "conversations",
    "by_seq",
    "roundtrip_at",
    "full_turn",
    "step",
    "records",
)
#: What a class holding round trips carries: the exchanges or their parses, both together, or a
#: way to one of them by seq or position.
ROUND_TRIPS = (
    "exchanges",
    "roundtrips",
    "round_trips",
    "scan",
    "by_seq",
    "roundtrip_at",
    "exchange_at",
    "exchange_by_seq",
)
#: A class named as a run (``Run``, ``Runs``, ``RunConversation``, ``Cassette``,
#: ``SessionCassette``) counts whatever it carries.
NAMED = re.compile(r"^Run|Runs?$|Cassette$")


def _modules(root: Path) -> list[str]:
    names = ["cassettes"]
    for info in pkgutil.walk_packages([str(root / "cassettes")], prefix="looptap.cassettes."):
        if ".examples" in info.name:  # sample agents, not the library
            continue
        names.append(info.name)
    return names


def _marks(cls: type) -> list[str]:
    """The marks a class carries: attributes, properties, methods, model or dataclass fields, and
    what its methods assign to ``self``."""
    names = set(getattr(cls, "model_fields", {}) or {}) | set(
        getattr(cls, "__dataclass_fields__", {}) or {}
    )
    try:
        names |= set(re.findall(r"self\.(\w+)\s*(?::[^=]*)?=", inspect.getsource(cls)))
    except (OSError, TypeError):
        pass
    marks = [m for m in MARKS if m in names or hasattr(cls, m)]
    if NAMED.search(cls.__name__):
        marks.append("named")
    return marks


def count(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(run-like classes, entry points): name → where it is public (and, for a class, why)."""
    sys.path.insert(0, str(root))
    classes: dict[str, str] = {}
    entries: dict[str, str] = {}
    funcs: list[object] = []
    for name in _modules(root):
        try:
            mod = importlib.import_module(name)
        except Exception:
            # an optional extra not installed (mitmproxy, textual): not the core's reader
            continue
        for attr in getattr(mod, "__all__", ()):
            obj = getattr(mod, attr, None)
            if (
                inspect.isclass(obj)
                and obj.__module__.startswith("looptap.cassettes")
                and not issubclass(obj, BaseException)
            ):
                marks = _marks(obj)
                if marks:
                    classes.setdefault(obj.__qualname__, f"{obj.__module__} ({', '.join(marks)})")
            elif inspect.isfunction(obj) and obj.__module__.startswith("looptap.cassettes"):
                funcs.append(obj)
    for fn in funcs:
        # a string under `from __future__ import annotations`
        ret = inspect.signature(fn).return_annotation
        ret_name = str(ret).split("[")[0].strip("'\" ")
        if ret_name.rsplit(".", 1)[-1] in classes:
            entries.setdefault(f"{fn.__module__}.{fn.__name__}", f"-> {ret}")
    return classes, entries


def _names(cls: type) -> set[str]:
    names = (
        set(getattr(cls, "model_fields", {}) or {})
        | set(getattr(cls, "__dataclass_fields__", {}) or {})
        | set(dir(cls))
    )
    try:
        names |= set(re.findall(r"self\.(\w+)\s*(?::[^=]*)?=", inspect.getsource(cls)))
    except (OSError, TypeError):
        pass
    return names


def holders(root: Path) -> dict[str, str]:
    """Every class of ``cassettes/`` and ``inspector/`` holding round trips (see ``--all``)."""
    sys.path.insert(0, str(root))
    found: dict[str, str] = {}
    names = (
        _modules(root)
        + ["inspector"]
        + [
            i.name
            for i in pkgutil.walk_packages([str(root / "inspector")], prefix="looptap.inspector.")
        ]
    )
    for name in names:
        try:
            mod = importlib.import_module(name)
        except Exception:
            continue
        for obj in vars(mod).values():
            if not inspect.isclass(obj) or obj.__module__ != name or issubclass(obj, BaseException):
                continue
            marks = [m for m in ROUND_TRIPS if m in _names(obj)]
            try:
                src = inspect.getsource(obj)
            except (OSError, TypeError):
                src = ""
            wraps = re.search(r"\b(RecordIndex|RequestBodies)\(", src) is not None
            if not marks and not wraps:
                continue
            if getattr(obj, "_is_protocol", False):  # an interface declared: it holds nothing
                found[f"{name}.{obj.__qualname__}"] = ", ".join(marks) + "; protocol"
                continue
            found[f"{name}.{obj.__qualname__}"] = ", ".join(marks) + (
                "; wraps index" if wraps else ""
            )
    return found


def zips(root: Path) -> list[str]:
    """``file:line`` of every ``zip(x.roundtrips, x.exchanges)`` (either order) in code and
    tests."""
    pat = re.compile(r"zip\((\w+)\.(?:roundtrips|exchanges), \1\.(?:roundtrips|exchanges)")
    out = []
    for folder in ("cassettes", "inspector", "proxy", "tests", "bench"):
        for path in sorted((root / folder).rglob("*.py")):
            if path.name == "runlike.py":  # (this file's own pattern)
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if pat.search(line):
                    out.append(f"{path.relative_to(root)}:{n}")
    return out


def main() -> None:
    args = sys.argv[1:]
    every = "--all" in args
    args = [a for a in args if a != "--all"]
    root = Path(args[0]).resolve() if args else Path(__file__).resolve().parents[1]
    if every:
        found = holders(root)
        print(f"tree: {root}")
        for name, why in sorted(found.items()):
            print(f"holds  {name:<58} {why}")
        where = zips(root)
        for w in where:
            print(f"zip    {w}")
        wrapping = sum(1 for why in found.values() if why.endswith("wraps index"))
        held = sum(1 for why in found.values() if not why.endswith("protocol"))
        print(
            f"classes holding round trips: {held} (and {len(found) - held} protocols); wrapping "
            f"RecordIndex/RequestBodies themselves: {wrapping}; zip(roundtrips, exchanges): "
            f"{len(where)}"
        )
        return
    classes, entries = count(root)
    from looptap import cassettes

    top = [
        n for n in cassettes.__all__ if n in classes or any(e.endswith("." + n) for e in entries)
    ]
    print(f"tree: {root}")
    for name, why in sorted(classes.items()):
        print(f"class  {name:<22} {why}")
    for name, why in sorted(entries.items()):
        print(f"entry  {name:<40} {why}")
    print(
        f"run-like public classes: {len(classes)}; entry points: {len(entries)}; exported from "
        f"cassettes: {', '.join(top)}"
    )


if __name__ == "__main__":
    main()
