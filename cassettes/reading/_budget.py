"""The memory a command may take to analyse a run (:func:`memory_budget`), held to by this
process's resident memory (:func:`rss`): a run that outgrows it is refused in one clear line
(:class:`RunTooLargeError`), not by a ``MemoryError`` half-way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CassetteError
from ..hints import count

if TYPE_CHECKING:
    from ..storage import RecordIndex

__all__ = ["RunTooLargeError", "memory_budget", "rss", "within_budget"]

#: The memory a command may take to analyse a run, in MB, unless ``LOOPTAP_MEMORY_BUDGET_MB``
#: says otherwise (``0``: no limit); never more than 60 % of an address-space limit (``ulimit -v``).
MEMORY_BUDGET_MB = 2048


class RunTooLargeError(CassetteError, MemoryError):
    """Analysing the run would take more memory than the budget (:func:`memory_budget`)."""


def memory_budget() -> int | None:
    """The memory budget in bytes (``None``: none), from :data:`MEMORY_BUDGET_MB`, the
    environment and the process's address-space limit."""
    import os
    import resource

    raw = os.environ.get("LOOPTAP_MEMORY_BUDGET_MB", "").strip()
    mb = int(raw) if raw.isdigit() else MEMORY_BUDGET_MB
    budget = mb * 1024 * 1024 if mb > 0 else None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and soft > 0:
        budget = min(budget or soft, int(soft * 0.6))
    return budget


def rss() -> int | None:
    """This process's resident memory in bytes (Linux; ``None`` elsewhere)."""
    import os

    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def within_budget(
    p: Path,
    budget: int | None,
    doing: str,
    index: RecordIndex,
    records: int,
    conversations: int | None = None,
    close: Callable[[], None] = lambda: None,
) -> None:
    """Raise :class:`RunTooLargeError` (after ``close()``) when this process holds more than
    ``budget`` bytes while ``doing`` (``analysing``, ``serving``) the run at ``p``, read through
    ``index``; saying how far it got (the round trips and conversations read)."""
    used = rss() if budget is not None else None
    if used is not None and budget is not None and used > budget:
        close()
        read = count(records, "round trip")
        if conversations is not None:
            read += f" and {count(conversations, 'conversation')}"
        raise RunTooLargeError(
            f"{p}: {doing} this run needs more than the memory budget of {budget // 2**20:,} "
            f"MB ({read} read, {index.consumed * 100 // max(index.size(), 1)} "
            "% of the file); set LOOPTAP_MEMORY_BUDGET_MB to allow more"
        )
