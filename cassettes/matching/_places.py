"""When and where a run was recorded, as the matcher tolerates them: the header's working
directory and home (:mod:`cassettes.places`) and its own ``created`` time. An epoch timestamp
within a year of that time in a request is volatile as a date is
(:attr:`VolatileSpans.recorded_time`).
"""

from __future__ import annotations

from typing import Any

from ..places import recorded
from ..reading import header_time
from ._volatile import VolatileSpans

__all__ = ["volatile_for"]


def volatile_for(header: Any) -> VolatileSpans:
    """The built-in detectors for replaying the run under ``header`` here: this process's cwd and
    home, and the recording's; an epoch near when it was recorded."""
    cwds, homes = recorded(header)
    return VolatileSpans(recorded_cwd=cwds, recorded_home=homes, recorded_time=header_time(header))
