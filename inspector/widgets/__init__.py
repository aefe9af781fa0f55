"""The inspector's widgets, one family per module, grouped by screen area."""

from __future__ import annotations
