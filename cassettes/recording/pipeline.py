"""The recording pipeline: one round trip in, one cassette record out, the same way for every
entry point (the recorder's writer process, ``looptap import``, the pytest plugin, the demo).

    remove Content-Encoding → redact → delta-encode the request's history → append to the
    :class:`~cassettes.storage.CassetteFile`

Redaction runs before encoding, so a secret never reaches the file. Nothing is computed per
record that no reader reads: the ``looptap.roundtrip/1`` view (``derived``, stored until 2026-11)
is ``looptap show --json``'s, made when asked for, and the parse (``parsed``, stored until 2026-11)
is the first reader's; readers ignore both blocks in older files. The
caller hands over the exchange as it captured it: a side still content-encoded is marked so
(``Exchange.request_encoded``, ``response_encoded``) and decoded here
(``cassettes.wire.decode_exchange``) before anything reads it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from .. import providers
from ..storage import (
    CassetteFile,
    HistoryEncoder,
    Redacted,
    depth_safe_record,
    dumps_record,
    exchange_to_record,
    read_records,
)
from ..wire import Exchange, decode_exchange
from ._cuts import cut_ends
from ._redactor import Redactor
from ._sealing import scrubbed

__all__ = ["CassetteWriter"]


class CassetteWriter:
    """Appends round trips to a cassette file. Thread-safe; one line per ``append``."""

    def __init__(
        self,
        path: str | Path,
        meta: dict[str, Any] | None = None,
        redactor: Redactor | None = None,
        fsync: bool = False,
    ) -> None:
        self.path = Path(path)
        self.redactor = redactor or Redactor()
        self._lock = threading.Lock()
        self._encoder = HistoryEncoder()
        self._seq = 0
        if self.path.exists() and self.path.stat().st_size > 0:
            self._resume()
        self._file = CassetteFile(self.path, meta, fsync)

    @property
    def fsync(self) -> bool:
        return self._file.fsync

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next round trip appended gets."""
        return self._seq

    def _resume(self) -> None:
        """Rebuild the history-delta state from an existing cassette, to append to it."""
        cas = read_records(self.path)
        for ex in cas.exchanges:
            body = ex.request_json()
            if isinstance(body, dict) and ex.seq is not None and not ex.request_json_cut:
                self._encoder.encode(ex.seq, body, self._history_key(ex, body))
            self._seq = max(self._seq, (ex.seq or 0) + 1)
        self._seq = max(self._seq, len(cas.exchanges) + len(cas.problems))

    @staticmethod
    def _history_key(ex: Exchange, body: dict[str, Any]) -> str | None:
        try:
            adapter = providers.detect(ex.method, urlsplit(ex.url), body)
        except ValueError:
            adapter = None
        return adapter.history_key(body) if adapter is not None else None

    def _encode_request(self, ex: Exchange, seq: int) -> dict[str, Any] | None:
        """The request body's stored form: a history delta when it extends an earlier request."""
        body = ex.request_json()
        if not isinstance(body, dict) or ex.request_json_cut:
            return None  # (a body cut at the walk bound is stored raw: exchange_to_record)
        form = self._encoder.encode(seq, body, self._history_key(ex, body))
        delta = form.get("delta")
        if delta is None:
            return form
        ex.history_delta = {
            "base": delta["base"],
            "keep": delta["keep"],
            "appended": len(delta["append"]),
        }
        if delta.get("rewritten"):
            ex.history_delta["rewritten"] = True
        return form

    def append(self, ex: Exchange) -> Exchange:
        """Decode, redact, encode and write one round trip; returns it as written (redacted, its
        ``seq`` set): what a caller that wants its parse hands to
        :func:`cassettes.parsing.parse_exchange`."""
        decode_exchange(ex)
        with self._lock:
            seq = self._seq
            self._seq += 1
            clean = self.redactor.exchange(ex)
            clean.seq = seq
            try:
                form = self._encode_request(clean, seq)
            except orjson.JSONEncodeError:
                # History items nested deeper than orjson writes cannot be hashed for the delta
                # encoding: the body is stored whole (raw, see depth_safe_record) instead.
                form = None
            rec = exchange_to_record(clean, seq, request_form=form)
            try:
                data = dumps_record(rec)
            except orjson.JSONEncodeError:
                data = dumps_record(depth_safe_record(rec, clean))
            self._file.append(Redacted(data))  # (``clean``: what the redactor made of ``ex``)
            return clean

    def append_side(self, rec: dict[str, Any]) -> None:
        """Write one record beside the round trips (a traced process: proxy/shell_trace.py), every
        string in it redacted as bodies are (what the redactor learned included), a string a
        bound cut with its end masked where a secret the cut fell in begins (:func:`cut_ends`)."""
        clean = scrubbed(cut_ends(rec, self.redactor), self.redactor)
        if not isinstance(clean, dict) or not isinstance(clean.get("type"), str):
            raise ValueError("not a record")
        with self._lock:
            self._file.append(Redacted(dumps_record(clean)))

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> CassetteWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
