"""How many public classes and entry points a reader of a run meets (issue 30: "a run is eleven classes").

    python bench/runlike.py [REPO]          # this tree, or another checkout (an older commit's worktree)

Public = named in ``cassettes.__all__`` or in the ``__all__`` of a module under ``cassettes/``.
Run-like = a public class that holds or reads a run's round trips, turns or conversations: it has
(as an attribute, a property, a method or a model field) one of :data:`MARKS`. An entry point = a
public function whose return annotation names a run-like class. Printed one per line, then the
counts, so two trees can be compared line by line.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

#: What a run-like class carries: the round trips, their exchanges, the turns or conversations of
#: a run, a way to one round trip by seq or position, or a step through a growing file.
MARKS = ("exchanges", "roundtrips", "round_trips", "conversations", "by_seq", "roundtrip_at", "full_turn", "step", "records")
#: A class named as a run (``Run``, ``Runs``, ``RunConversation``, ``Cassette``, ``SessionCassette``) counts whatever it carries.
NAMED = re.compile(r"^Run|Runs?$|Cassette$")


def _modules(root: Path) -> list[str]:
    names = ["cassettes"]
    for info in pkgutil.walk_packages([str(root / "cassettes")], prefix="cassettes."):
        if ".examples" in info.name:  # sample agents, not the library
            continue
        names.append(info.name)
    return names


def _marks(cls: type) -> list[str]:
    """The marks a class carries: attributes, properties, methods, model or dataclass fields, and
    what its methods assign to ``self``."""
    names = set(getattr(cls, "model_fields", {}) or {}) | set(getattr(cls, "__dataclass_fields__", {}) or {})
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
        except Exception:  # an optional extra not installed (mitmproxy, textual): not the core's reader
            continue
        for attr in getattr(mod, "__all__", ()):
            obj = getattr(mod, attr, None)
            if inspect.isclass(obj) and obj.__module__.startswith("cassettes") and not issubclass(obj, BaseException):
                marks = _marks(obj)
                if marks:
                    classes.setdefault(obj.__qualname__, f"{obj.__module__} ({', '.join(marks)})")
            elif inspect.isfunction(obj) and obj.__module__.startswith("cassettes"):
                funcs.append(obj)
    for fn in funcs:
        ret = inspect.signature(fn).return_annotation  # a string under `from __future__ import annotations`
        ret_name = str(ret).split("[")[0].strip("'\" ")
        if ret_name.rsplit(".", 1)[-1] in classes:
            entries.setdefault(f"{fn.__module__}.{fn.__name__}", f"-> {ret}")
    return classes, entries


def main() -> None:
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    classes, entries = count(root)
    import cassettes

    top = [n for n in cassettes.__all__ if n in classes or any(e.endswith("." + n) for e in entries)]
    print(f"tree: {root}")
    for name, why in sorted(classes.items()):
        print(f"class  {name:<22} {why}")
    for name, why in sorted(entries.items()):
        print(f"entry  {name:<40} {why}")
    print(f"run-like public classes: {len(classes)}; entry points: {len(entries)}; exported from cassettes: {', '.join(top)}")


if __name__ == "__main__":
    main()
