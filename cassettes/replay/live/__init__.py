"""What a request sent to a live upstream (past a fork's cursor, or new episodes being recorded)
is changed into. One façade, its names pinned by tests/replay/test_live_surface.py, over:
what-if edits (``_edits``, made in a request by ``_rewrite``), a request continuing an answer the
live upstream never gave sent self-contained (``_chains``), an answer cut at the token cap
continued (``_continuation``), the model a request asks for and the request with another
(``_model``). The clients that send it are :mod:`cassettes.net`'s.

Used by the replay server and by the fork's cursor alike; imports neither.
"""

from __future__ import annotations

from ._chains import Chains, Threads, as_sent_live
from ._continuation import (
    Continuation,
    cut_text,
    joined,
    parsed,
    rendered_for,
)
from ._edits import (
    MAX_CONTINUE,
    Edit,
    EditError,
    edit_file,
    edit_notes,
    edited_headers,
    parse_edit,
    parse_edits,
)
from ._model import model_of, with_model
from ._rewrite import apply_edits, carried

__all__ = [
    "MAX_CONTINUE",
    "Chains",
    "Continuation",
    "Edit",
    "EditError",
    "Threads",
    "apply_edits",
    "as_sent_live",
    "carried",
    "cut_text",
    "edit_file",
    "edit_notes",
    "edited_headers",
    "joined",
    "model_of",
    "parse_edit",
    "parse_edits",
    "parsed",
    "rendered_for",
    "with_model",
]
