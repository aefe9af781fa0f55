"""The core left out of pytest's assertion rewriting, which the plugin's distribution gets.

pytest rewrites the ``assert`` statements of every module in a distribution that has a pytest11
entry point (the whole ``cassettes`` package, with the plugin): each module the plugin loads is
then parsed and compiled from source, and that work is cached only where pytest may write a
``.pyc`` beside it. Where it may not (``PYTHONDONTWRITEBYTECODE``, set in many containers; a
read-only install), every session paid it again: about 0.4 s of CPU before the first replay,
more than the replay of 30 tests. The core's asserts are invariants, not test assertions, so
nothing is lost by loading it as plain Python: only the plugin module itself stays rewritten.
"""

from __future__ import annotations

import sys

__all__ = ["spare_core"]

#: The core's package, which pytest would rewrite with the plugin: ``looptap.cassettes`` (pytest
#: marks it, or the top-level ``looptap`` above it: either mark is taken off).
CORE = __name__.rpartition(".replay.")[0]


def spare_core() -> None:
    """Unmark :data:`CORE` in pytest's import hook, when one is installed (a pytest session).

    The hook's marks are not public API: where they are missing, or not the set and dict they
    are in pytest 8 and 9, nothing changes (the core is only slower to load).
    """
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        cache = getattr(finder, "_marked_for_rewrite_cache", None)
        if not (isinstance(marked, set) and isinstance(cache, dict)):
            continue
        over = {m for m in marked if m == CORE or CORE.startswith(f"{m}.")}
        if over:
            marked.difference_update(over)
            cache.clear()
