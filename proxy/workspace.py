"""The working tree of a coding agent, per turn (docs/shell-file-tools.md): with ``looptap run
--shell-trace`` the recorder takes the tree the agent runs in (its working directory) at the start
and again each time the agent sends a model request (it waits for the answer then: what changed
since the last request is what its tools did for the last answer), and writes one ``files`` record
per change seen: each file created, changed or removed, with its size and sha256 before and after.

The contents are kept content-addressed beside the cassette (``RUN.jsonl.files/``, mode 0700, each
blob 0600, named by its sha256) so that a fork can rebuild the tree as it was: the start's contents
of every file that changed, and each change's. In a git work tree what git already holds is not
read at the start: a tracked file git finds clean is named by its blob id, and its start contents
are taken from git (``git cat-file``) and kept at its first change; an ignored file (a build
output) is seen by its size only, and a change of it says its start was not read (``unread``).
Git is only read (no optional locks: the index is never refreshed). A content the redactor would
mask (a key in a ``.env``, in a file of the tree or from git) is not kept: its record says
``withheld``. Bounded: :data:`FILES` files walked (the rest said), files over :data:`HASHED`
bytes named by size only, blobs over :data:`BLOB` bytes not kept, :data:`KEPT` bytes of blobs a
run.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..cassettes.shell import (
    BLOB,
    BY_BLOB,
    FILES,
    GIT,
    HASHED,
    KEPT,
    GitTree,
    file_hash,
    git_blobs,
    git_tree,
    tree_line,
    walk,
)
from ..cassettes.storage import Redacted, write_sealed

__all__ = ["Workspace"]

#: A file as seen: (size, mtime_ns, inode, sha256 or None when too large to hash or not read).
Seen = tuple[int, int, int, str | None]
#: Why a file's start contents were not read (a ``files`` change's ``unread``).
IGNORED = "ignored by git: its contents at the start were not read"


class Workspace:
    """The tree under ``root``, scanned at the start (:meth:`start`) and at each model request
    (:meth:`scan`, from any thread: scans are serialised); each change is handed to ``emit`` as a
    ``files`` record, contents kept in ``keep`` as ``seal`` (the redactor) passes them, unless
    it masked something in them (docs/redaction.md, "One gate")."""

    def __init__(
        self,
        root: str,
        keep: Path,
        emit: Callable[[dict[str, Any]], None],
        seal: Callable[[bytes], Redacted],
    ) -> None:
        self.root = root
        self.keep = keep
        self.emit = emit
        self.seal = seal
        self.seen: dict[str, Seen] = {}
        self.kept = 0
        self.cut = False
        #: Files git held clean at the start, not yet changed: their blob ids.
        self.in_git: dict[str, str] = {}
        #: Files whose start contents were not read, not yet changed: why.
        self.unread: dict[str, str] = {}
        self._lock = threading.Lock()

    def _blob(self, sha: str | None, data: bytes | None) -> str | None:
        """Keep ``data`` under its sha256; ``None`` when kept, else why not."""
        if sha is None:
            return "too large to hash"
        if data is None:
            return "too large to keep"
        clean = self.seal(data)
        if clean != data:
            return "withheld: it holds a secret"
        path = self.keep / sha
        if path.exists():
            return None
        if self.kept + len(data) > KEPT:
            return "past the run's bound on kept contents"
        try:
            self.keep.mkdir(mode=0o700, exist_ok=True)
            if not write_sealed(path, clean):
                return None
        except OSError as exc:
            return f"not kept ({exc.strerror or exc})"
        self.kept += len(data)
        return None

    def _look(self, rel: str, st: os.stat_result) -> tuple[Seen, str | None]:
        sha, data = file_hash(os.path.join(self.root, rel), st.st_size)
        return (st.st_size, st.st_mtime_ns, st.st_ino, sha), self._blob(sha, data)

    def start(self) -> None:
        """The tree at the start: each file hashed and its contents kept (in a git work tree only
        the files git does not hold: :func:`git_tree`); one ``files`` record with the count and a
        digest of the whole (a fork compares the user's tree with it)."""
        with self._lock:
            t = time.time()
            git = git_tree(self.root)
            files, self.cut = walk(self.root)
            listing = hashlib.sha256()
            unkept = 0
            for rel, st in files.items():
                if git is not None:
                    line, kept = self._start_git(rel, st, git)
                else:
                    seen, why = self._look(rel, st)
                    self.seen[rel] = seen
                    line, kept = str(seen[3]), why is None
                unkept += not kept
                listing.update(f"{rel}\0{line}\n".encode(errors="surrogateescape"))
            self.emit(
                {
                    "type": "files",
                    "at": t,
                    "start": True,
                    "root": self.root,
                    "files": len(files),
                    "digest": listing.hexdigest(),
                    "cut": self.cut,
                    "unkept": unkept,
                    **(
                        {
                            "digest_of": BY_BLOB,
                            "in_git": len(self.in_git),
                            "unread": len(self.unread),
                        }
                        if git is not None
                        else {}
                    ),
                }
            )

    def _start_git(self, rel: str, st: os.stat_result, git: GitTree) -> tuple[str, bool]:
        """A file of a tree in git at the start: its digest line (:func:`tree_line`), and whether
        its start contents are held (by git, or kept)."""
        line, data = tree_line(self.root, rel, st, git)
        stat3 = (st.st_size, st.st_mtime_ns, st.st_ino)
        if rel in git.clean:
            self.in_git[rel] = line
            self.seen[rel] = (*stat3, None)
            return line, True
        if data is None and git.ignored(rel):
            self.unread[rel] = IGNORED
            self.seen[rel] = (*stat3, None)
            return line, False
        sha = hashlib.sha256(data).hexdigest() if data is not None else None
        why = self._blob(sha, data if data is not None and len(data) <= BLOB else None)
        self.seen[rel] = (*stat3, sha)
        return line, why is None

    def _from_git(self, rels: list[str]) -> None:
        """The start contents of files git held clean, at their first change (or removal): taken
        from git, checked against the start's size, hashed and kept as a change's ``before``."""
        wanted = {rel: self.in_git.pop(rel) for rel in rels if rel in self.in_git}
        got: dict[str, bytes] = {}
        part: dict[str, str] = {}
        size = 0
        for rel, oid in wanted.items():  # (asked in parts whose blobs fit git's output bound)
            if self.seen[rel][0] > HASHED:
                continue
            if part and size + self.seen[rel][0] > GIT // 2:
                got |= git_blobs(self.root, part)
                part, size = {}, 0
            part[rel] = oid
            size += self.seen[rel][0] + 64
        if part:
            got |= git_blobs(self.root, part)
        for rel in wanted:
            was = self.seen[rel]
            data = got.get(rel)
            if was[0] > HASHED:
                self.unread[rel] = "its contents at the start: too large to hash"
                continue
            if data is None or len(data) != was[0]:
                self.unread[rel] = "its contents at the start were not found in git"
                continue
            sha = hashlib.sha256(data).hexdigest()
            self._blob(sha, data if len(data) <= BLOB else None)  # (not kept: a fork says so)
            self.seen[rel] = (*was[:3], sha)

    def scan(self, at: float | None = None, last: bool = False) -> None:
        """What changed since the last scan, as one ``files`` record (none when nothing did)."""
        with self._lock:
            files, cut = walk(self.root)
            changes: list[dict[str, Any]] = []
            moved = [
                rel
                for rel, st in files.items()
                if rel in self.in_git
                and self.seen[rel][:3] != (st.st_size, st.st_mtime_ns, st.st_ino)
            ]
            gone = [rel for rel in self.seen if rel not in files] if not cut else []
            if self.in_git and (moved or gone):
                self._from_git(moved + gone)
            for rel, st in files.items():
                was = self.seen.get(rel)
                if was is not None and was[:3] == (st.st_size, st.st_mtime_ns, st.st_ino):
                    continue
                seen, why = self._look(rel, st)
                if was is not None and was[3] == seen[3] and seen[3] is not None:
                    self.seen[rel] = seen  # touched, not changed
                    continue
                self.seen[rel] = seen
                change = self._change(rel, was, seen[3], seen[0])
                if why is not None:
                    change["unkept"] = why
                changes.append(change)
            for rel in gone:  # (a walk cut short says nothing of the files it did not reach)
                changes.append(self._change(rel, self.seen.pop(rel), None, 0))
            if changes or last:
                self.emit(
                    {
                        "type": "files",
                        "at": at if at is not None else time.time(),
                        "changes": changes[:FILES],
                        "cut": cut,
                        **({"last": True} if last else {}),
                    }
                )

    def _change(self, rel: str, was: Seen | None, after: str | None, size: int) -> dict[str, Any]:
        """A change's record: a file whose start was not read says so (``before`` ``"unread"``)."""
        unread = self.unread.pop(rel, None)
        if unread is not None:
            return {"path": rel, "before": "unread", "unread": unread, "after": after, "size": size}
        before = None if was is None else was[3]
        return {"path": rel, "before": before, "after": after, "size": size}

    # -- as a mitmproxy addon: a model request is a turn's boundary ------------------------------
    def requestheaders(self, flow: Any) -> None:
        """A request the agent sent to a model (a reverse listener's, or an LLM API host's through
        the forward proxy): the tree is scanned on a thread of its own, the request goes on."""
        if not _model_request(flow):
            return
        at = flow.request.timestamp_start
        threading.Thread(target=self._scan_quietly, args=(at,), daemon=True).start()

    def _scan_quietly(self, at: float) -> None:
        try:
            self.scan(at)
        except Exception:
            pass  # the tree could not be read: the next scan says what changed since


def _model_request(flow: Any) -> bool:
    from mitmproxy.proxy import mode_specs

    from ..cassettes.providers import is_llm_host

    if isinstance(flow.client_conn.proxy_mode, mode_specs.ReverseMode):
        mcp = ("mcp-protocol-version", "mcp-session-id")
        return not any(h in flow.request.headers for h in mcp)
    req = flow.request
    return bool(is_llm_host(req.pretty_host, (), req.path))
