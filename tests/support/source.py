"""The cyclic collector paused while the house-rule tests parse the tree's Python source
(tests/test_boundaries.py, tests/test_library_private.py, tests/test_write_gate.py).

Parsing builds a great many containers, which the collector walks again and again while they are
being made (each full collection walks every tree made so far): parsing the shipped packages
(427 files, 97,000 lines) took 2.4 s of CPU with the collector on and 0.6 s with it paused
(Python 3.11, session 56). A syntax tree holds no cycle: each is freed when the walk over it is
done, collector or not. A tree kept past the pause costs the collector its walk again, so the
walks are made inside it and only their findings leave it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off for the block (on again after, if it was)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
