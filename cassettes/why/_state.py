"""The output directory of ``looptap why -o DIR``: the branch cassettes and ``why.json``, the
state the verdict is computed from, written after every branch (so an interrupted run keeps what
finished, and ``--resume`` continues it).

``-o DIR`` is refused when it exists and is not an earlier ``why`` of the same run (the run's
sha256 in its ``why.json``); an earlier one is continued only with ``--resume``. Nothing in a
directory looptap did not make is touched.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

import orjson

from ..errors import CassetteError
from ..recording import seal
from ..storage import check_target, describe, read_input, write_new

__all__ = [
    "STATE",
    "State",
    "WhyDirError",
    "flags_said",
    "given_last",
    "kept_flags",
    "read_state",
    "run_digest",
]

#: The state file's name inside the output directory.
STATE = "why.json"
#: Bytes of a state file read (it lists branches, not their contents).
_MAX_STATE = 16 << 20


class WhyDirError(CassetteError):
    """An output directory ``why`` may not write in."""


def run_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def kept_flags(passed: list[str]) -> list[str] | None:
    """The branches' ``--upstream``/``--confdir`` as ``why.json`` keeps them (what ``--confirm``
    reaches the same upstream with): ``None``, not kept, when an upstream URL carries credentials
    (``user:password@``): a secret never reaches a file."""
    from urllib.parse import urlsplit

    for flag, value in zip(passed[::2], passed[1::2], strict=True):
        if flag == "--upstream" and urlsplit(value.partition("=")[2]).password is not None:
            return None
    return list(passed)


def given_last(given: list[str], kept: Any) -> tuple[list[str], str]:
    """The ``--upstream``/``--confdir`` flags a ``--resume`` or ``--confirm`` passes to its
    branches, and how they were chosen (a clause said on stderr): what is given now, and of what
    the earlier run kept (``why.json``'s ``passed``) all that is not given again: an API's
    ``--upstream`` given now replaces the kept one of that API only, ``--confdir`` given now the
    kept ``--confdir``; the other kept flags stay (``--confdir`` alone never drops the kept
    upstreams: the branches would go to the vendors' APIs). ``kept`` that is not a list of flags
    (an upstream URL with credentials, an older looptap) keeps nothing."""
    pairs = list(zip(kept[::2], kept[1::2], strict=False)) if _flag_list(kept) else []
    now = list(zip(given[::2], given[1::2], strict=True))
    names = {v.partition("=")[0].strip().lower() for f, v in now if f == "--upstream"}
    confdir = any(f == "--confdir" for f, _ in now)
    stay = [
        (f, v)
        for f, v in pairs
        if (f == "--upstream" and v.partition("=")[0].strip().lower() not in names)
        or (f == "--confdir" and not confdir)
    ]
    ups = [p for p in [*stay, *now] if p[0] == "--upstream"]
    out = [x for p in [*ups, *[p for p in [*stay, *now] if p[0] == "--confdir"]] for x in p]
    if not now:
        how = f"the earlier run kept in its why.json ({flags_said(out)})"
    elif not stay:
        how = f"given now ({flags_said(out)})"
    else:
        how = (
            f"given now ({flags_said([x for p in now for x in p])}) and, of the earlier run's, "
            f"those not given again ({flags_said([x for p in stay for x in p])})"
        )
    return out, how


def _flag_list(kept: Any) -> bool:
    return (
        isinstance(kept, list)
        and len(kept) % 2 == 0
        and all(isinstance(x, str) for x in kept)
        and all(f in ("--upstream", "--confdir") for f in kept[::2])
    )


def flags_said(passed: list[str]) -> str:
    """``--upstream``/``--confdir`` flags as said on stderr: an upstream URL's credentials
    (``user:password@``) left out (a secret never reaches a log)."""
    from urllib.parse import urlsplit

    out: list[str] = []
    for flag, value in zip(passed[::2], passed[1::2], strict=True):
        if flag == "--upstream":
            name, _, url = value.partition("=")
            parts = urlsplit(url)
            if parts.username is not None or parts.password is not None:
                url = parts._replace(netloc=f"…@{parts.hostname or ''}" + (
                    f":{parts.port}" if parts.port else "")).geturl()  # fmt: skip
            value = f"{name}={url}"
        out.append(f"{flag} {value}")
    return " ".join(out) or "none: the real APIs"


def read_state(path: Path) -> dict[str, Any] | None:

    try:
        doc = orjson.loads(read_input(path, "the state file", _MAX_STATE))
    except (CassetteError, orjson.JSONDecodeError, OSError):
        return None
    return doc if isinstance(doc, dict) and doc.get("looptap") == "why" else None


class State:
    """``why.json`` in the output directory, kept in memory and written (atomically) on every
    change."""

    def __init__(self, directory: Path, doc: dict[str, Any]) -> None:
        self.directory = directory
        self.doc = doc
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls, directory: Path, run: Path, digest: str, resume: bool, fresh: dict[str, Any]
    ) -> State:
        """The state of ``directory`` (created when missing); raises :class:`WhyDirError` (see
        the module docstring)."""
        import os
        import stat

        try:
            st = os.lstat(directory)
        except FileNotFoundError:
            st = None
        if st is None:
            if resume:
                raise WhyDirError(
                    f"--resume: {directory} does not exist: nothing "
                    "to continue (leave --resume out to start)"
                )
            try:
                directory.mkdir(mode=0o700, parents=True)
            except OSError as exc:
                raise WhyDirError(
                    f"-o {directory} cannot be created: {exc.strerror or exc}"
                ) from None
            state = cls(
                directory,
                {"looptap": "why", "run": str(run), "sha256": digest, **fresh, "branches": {}},
            )
            state.save()
            return state
        if not stat.S_ISDIR(st.st_mode):
            raise WhyDirError(
                f"-o {directory} is {describe(st)}, not a directory of an earlier looptap why: "
                "refused (give a new directory)"
            )
        doc = read_state(directory / STATE)
        if doc is None:
            raise WhyDirError(
                f"-o {directory} exists and is not the output of an earlier looptap why: refused "
                "(give a new directory)"
            )
        if doc.get("sha256") != digest:
            raise WhyDirError(
                f"-o {directory} holds a looptap why of another run "
                f"({str(doc.get('run'))[:200]!r}): refused (give a new directory)"
            )
        if not resume:
            raise WhyDirError(
                f"-o {directory} holds an earlier looptap why of this run: --resume continues it "
                "(its finished branches are kept), or give a new directory"
            )
        for k in ("outcome", "samples"):
            if k in fresh and doc.get(k) != fresh[k]:
                raise WhyDirError(
                    f"--resume: {directory} was started with another {k} ({doc.get(k)!r}): give "
                    "the same, or a new directory"
                )
        return cls(directory, doc)

    def branch(self, key: str, k: int) -> dict[str, Any] | None:
        got = (self.doc.get("branches") or {}).get(key, {}).get(str(k))
        return got if isinstance(got, dict) else None

    def put_branch(self, key: str, k: int, result: dict[str, Any]) -> None:
        with self._lock:
            self.doc.setdefault("branches", {}).setdefault(key, {})[str(k)] = result
            self.save()

    def put(self, name: str, value: Any) -> None:
        with self._lock:
            self.doc[name] = value
            self.save()

    def save(self) -> None:

        target = check_target(
            self.directory / STATE, "the state file", owned=lambda p: read_state(p) is not None
        )
        write_new(target, seal(orjson.dumps(self.doc, option=orjson.OPT_INDENT_2, default=str)))
