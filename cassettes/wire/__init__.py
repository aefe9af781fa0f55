"""What crossed the wire, uninterpreted. One package, in private modules behind this façade (the
names below are its whole surface, pinned by tests/cassettes/test_wire_surface.py):

- the raw round trip (``_exchange``), its Content-Encoding decoded within a budget
  (``_decoding``) and its stream framed: SSE, NDJSON, JSON arrays, AWS event streams
  (``_framing``); a multipart form's fields (``_form``);
- the marks looptap itself writes on it: the placeholder its redactor writes in place of a secret
  (``_exchange``), a fork's what-if edit marks (``_edit_marks``), the response headers only
  looptap writes and a replay miss's note in one of them (``_own_headers``).

Plain imports: what the package adds to a command that reads a run is two small modules
(``_edit_marks``, ``_own_headers``); its dependencies (hashlib, secrets) are loaded anyway.
"""

from __future__ import annotations

from ._decoding import (
    Decoder,
    OverBudget,
    body_cut,
    decode_chunks,
    decode_exchange,
    salvage,
)
from ._edit_marks import (
    EDIT_AUTH_HEADER,
    EDIT_HEADER,
    KEY_ENV,
    MAX_HEADER,
    TARGET,
    authentic,
    checked,
    client_body,
    from_header,
    item_of,
    mark,
    new_key,
    seal,
    target_of,
    to_header,
)
from ._exchange import (
    AGENT_CLOSED,
    NEXT_TURN,
    RECORDER_MADE,
    REDACTED,
    UNSET,
    Exchange,
    Headers,
    cut_by_client,
    header,
)
from ._form import form_fields
from ._framing import (
    Chunk,
    Event,
    Framed,
    frame,
    is_aws_eventstream,
    parse_aws_eventstream,
    parse_sse,
    reseal_aws_eventstream,
)
from ._own_headers import (
    MAX_NOTE,
    NOTE_HEADER,
    OWN_RESPONSE_HEADERS,
    REPLAY_HEADER,
    MissNote,
    MissVerdict,
    read_miss,
    without_own,
)

__all__ = [
    "AGENT_CLOSED",
    "EDIT_AUTH_HEADER",
    "EDIT_HEADER",
    "KEY_ENV",
    "MAX_HEADER",
    "MAX_NOTE",
    "NEXT_TURN",
    "NOTE_HEADER",
    "OWN_RESPONSE_HEADERS",
    "RECORDER_MADE",
    "REDACTED",
    "REPLAY_HEADER",
    "TARGET",
    "UNSET",
    "Chunk",
    "Decoder",
    "Event",
    "Exchange",
    "Framed",
    "Headers",
    "MissNote",
    "MissVerdict",
    "OverBudget",
    "authentic",
    "body_cut",
    "checked",
    "client_body",
    "cut_by_client",
    "decode_chunks",
    "decode_exchange",
    "form_fields",
    "frame",
    "from_header",
    "header",
    "is_aws_eventstream",
    "item_of",
    "mark",
    "new_key",
    "parse_aws_eventstream",
    "parse_sse",
    "read_miss",
    "reseal_aws_eventstream",
    "salvage",
    "seal",
    "target_of",
    "to_header",
    "without_own",
]
