"""The screens: the main one (the run) with the objects it holds (its reading, its player), and
the modal ones, help and search."""

from __future__ import annotations
