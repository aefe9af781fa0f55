"""What a fork itself changed in a branch's requests (``--model``, ``--edit``), labelled as the
fork's rather than the client's, and the later differences of a conversation folded under the change
they follow from: how ``looptap diff`` reads a branch beside its origin.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from ...matching import short
from ...wire import Exchange
from .divergence import Divergence

__all__ = ["Folding", "fork_changes"]


#: The layer of a difference the fork itself made (``--model``, ``--edit``): not the client's.
FORK = "fork"
_MODEL_IN_PATH = re.compile(r"/models/([^/:]+)(?=:)")


def fork_changes(
    found: list[Divergence], xa: Exchange, xb: Exchange, fork: dict[str, Any]
) -> list[Divergence]:
    """``found`` (one turn's divergences) with those the fork made labelled as the fork's: the
    model it asked for (the body's ``model``, or a path's ``/models/NAME:``) and the items
    its edits rewrote (B's edit marks)."""
    model = fork.get("model") if isinstance(fork.get("model"), str) else None
    for d in found:
        if d.layer != "C":
            continue
        if d.edited_b:
            d.layer, d.message = FORK, f"edited {', '.join(d.edited_b)} (asked with --edit)"
        elif model is not None and d.path == "model" and d.changes and d.changes[0].actual == model:
            d.layer, d.message = (
                FORK,
                f"model {_said(d.changes[0].expected)} → {_said(model)} (asked with --model)",
            )
        elif model is not None and d.path == "(url)" and d.message.startswith("the agent called"):
            was = _model_in_path(xa.url, xb.url, model)
            if was is not None:
                d.layer, d.message = (
                    FORK,
                    f"model {_said(was)} → {_said(model)} (asked with --model, in the path)",
                )
    return found


def _model_in_path(url_a: str, url_b: str, model: str) -> str | None:
    """The model A's path names (``/models/NAME:``) where B's names ``model`` and is A's
    otherwise, or ``None``."""
    pa, pb = urlsplit(url_a).path, urlsplit(url_b).path
    ma, mb = _MODEL_IN_PATH.search(pa), _MODEL_IN_PATH.search(pb)
    if ma is None or mb is None or mb.group(1) != model:
        return None
    return ma.group(1) if pb[: mb.start(1)] + ma.group(1) + pb[mb.end(1) :] == pa else None


def _said(value: Any) -> str:
    """A model name as said in a line (a string as it is, clipped; anything else as JSON)."""
    return value[:80] if isinstance(value, str) else short(value)


class Folding:
    """A conversation's differences, turn by turn, folded under the change they follow from: the
    conversation's first change (what the fork changed, or else what the model first emitted
    differently) is listed, and every later difference of the client's request (its history now
    holds the branch's own answers, the results of the calls they made, the edited item again)
    and every repeat of the fork's change is folded under it. What the model emitted and what the
    API reported stay listed turn by turn: that is the answer to the what-if."""

    def __init__(self) -> None:
        self.root: Divergence | None = None

    def fold(self, found: list[Divergence], k: int) -> list[Divergence]:
        out: list[Divergence] = []
        for d in found:
            later = self.root is not None and self.root.turn is not None and k > self.root.turn
            if self.root is not None and (
                (d.layer == FORK and (later or d.message == self.root.message))
                or (d.layer == "C" and later)
            ):
                self.root.folded.append(d)
                continue
            if self.root is None and d.layer in (FORK, "E"):
                self.root = d
            out.append(d)
        return out
