"""The screens, in private modules behind this façade (its names pinned by
tests/inspector/test_surface.py): the main one (``_main``, the run) with the objects it holds
(its reading, ``_reading``; its player, ``_player``), and the modal ones, help (``_help``) and
search (``_search``)."""

from __future__ import annotations

from ._help import HelpScreen, key_groups
from ._main import MainScreen
from ._search import SearchScreen

__all__ = ["HelpScreen", "MainScreen", "SearchScreen", "key_groups"]
