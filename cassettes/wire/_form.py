"""A ``multipart/form-data`` request body read as its fields (RFC 7578): what an API that takes a
file (an audio transcription, an image edit) was asked, as a JSON-like object the adapters read as
they read a JSON body.

A text field is its value (UTF-8, cut at :data:`MAX_FIELD` characters); a file field is what it
was, never its bytes: ``{"filename", "content_type", "bytes"}``. A name sent more than once
(``timestamp_granularities[]``) is the list of its values. Bounded: at most :data:`MAX_PARTS`
parts are read, and a body that is no form (no boundary, no part) is ``None``.
"""

from __future__ import annotations

import re
from typing import Any

from ..lazy import pattern

__all__ = ["MAX_FIELD", "MAX_PARTS", "form_fields"]

#: The most parts of a form read, and the longest text field kept (characters).
MAX_PARTS = 256
MAX_FIELD = 65_536

_BOUNDARY = pattern(r'boundary="?([^";,\s]{1,200})"?', re.I)
_NAME = pattern(r'\bname="([^"\r\n]{0,200})"', re.I)
_FILENAME = pattern(r'\bfilename="([^"\r\n]{0,500})"', re.I)
_TYPE = pattern(r"^content-type:[ \t]*([^\r\n]{1,200})", re.I | re.M)


def form_fields(body: bytes, ctype: str | None) -> dict[str, Any] | None:
    """The fields of a ``multipart/form-data`` body (see the module's docstring), or ``None`` when
    ``ctype`` names no form or the body holds no part."""
    if not ctype or not ctype.lower().lstrip().startswith("multipart/form-data"):
        return None
    m = _BOUNDARY.search(ctype)
    if m is None:
        return None
    delimiter = b"--" + m.group(1).encode("latin-1")
    out: dict[str, Any] = {}
    pieces = body.split(delimiter, MAX_PARTS + 1)[1 : MAX_PARTS + 1]
    for piece in pieces:
        if piece.startswith(b"--"):  # the closing delimiter
            break
        head, sep, value = piece.partition(b"\r\n\r\n")
        if not sep:
            head, sep, value = piece.partition(b"\n\n")
        if not sep:
            continue
        headers = head.decode("utf-8", "replace")
        name = _NAME.search(headers)
        if name is None:
            continue
        value = value.removesuffix(b"\r\n").removesuffix(b"\n")
        filename = _FILENAME.search(headers)
        ctype_part = _TYPE.search(headers)
        field: Any
        if filename is not None:
            field = {
                "filename": filename.group(1),
                "content_type": ctype_part.group(1).strip() if ctype_part else None,
                "bytes": len(value),
            }
        else:
            field = value[: MAX_FIELD * 4].decode("utf-8", "replace")[:MAX_FIELD]
        key = name.group(1)
        held = out.get(key)
        if isinstance(held, list):
            held.append(field)
        elif key in out:
            out[key] = [held, field]
        else:
            out[key] = [field] if key.endswith("[]") else field
    return out or None
