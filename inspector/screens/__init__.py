"""The screens: the main one (the run), and the modal ones, help and search."""

from __future__ import annotations
