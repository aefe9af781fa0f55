"""The texts of a record that a bound cut before the redactor read them (docs/redaction.md, "Cut
by a bound"): the cut can fall inside a key, whose piece no format rule knows, so each such end is
masked where :meth:`Redactor.cut_at <cassettes.recording.Redactor.cut_at>` says a secret the cut
fell in begins; ``looptap verify`` reads the same ends (:func:`cut_texts`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._redactor import Redactor

__all__ = ["cut_ends", "cut_texts"]


def cut_texts(rec: Any) -> Iterator[tuple[str, int | None, str]]:
    """``(field, index, text)`` of each text of a process record (proxy/shell_trace.py) whose end
    a bound cut: the argv words strace's string cap or the argv's character cap cut
    (``cut_words``; ``then_cut_words`` of the program it ran next), a stream past its kept head
    (``stdout_bytes`` more than ``stdout`` holds). None for other records."""
    if not isinstance(rec, dict) or rec.get("type") != "process":
        return
    for key, cuts in (("argv", "cut_words"), ("then", "then_cut_words")):
        words, cut = rec.get(key), rec.get(cuts)
        if isinstance(words, list) and isinstance(cut, list):
            for i, w in enumerate(words):
                if i in cut and isinstance(w, str):
                    yield key, i, w
    for stream in ("stdout", "stderr"):
        text, n = rec.get(stream), rec.get(stream + "_bytes")
        if (
            isinstance(text, str)
            and isinstance(n, int)
            and n > len(text.encode("utf-8", "replace"))
        ):
            yield stream, None, text


def cut_ends(rec: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """``rec`` with the end of each of its :func:`cut_texts` masked
    (:meth:`Redactor.cut_end <cassettes.recording.Redactor.cut_end>`); a stream so masked no
    longer says its writes' order (``order_cut``: its runs' offsets end inside the mask)."""
    out = rec
    for key, i, text in list(cut_texts(rec)):
        masked = redactor.cut_end(text)
        if masked == text:
            continue
        if out is rec:
            out = dict(rec)
        if i is None:
            out[key] = masked
            if out.get("order"):
                out["order_cut"] = True
        else:
            out[key] = [masked if j == i else w for j, w in enumerate(out[key])]
    return out
