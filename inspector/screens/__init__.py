"""Modal screens: help and search."""

from __future__ import annotations
