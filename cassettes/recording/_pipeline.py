"""The recording pipeline: one round trip in, one cassette record out, the same way for every
entry point (the recorder's writer process, ``looptap import``, the pytest plugin, the demo).

    remove Content-Encoding → redact → delta-encode the request's history → parse (incrementally,
    against the round trip it extends; not in the recorder) → append to the
    :class:`~cassettes.storage.CassetteFile`

Redaction runs before encoding, so a secret never reaches the file. Nothing is computed per
record that no reader reads: the ``looptap.roundtrip/1`` view (``derived``, stored until 2026-11)
is ``looptap show --json``'s, made when asked for, and the response's parse (``parsed``, stored
until 2026-11) is the first reader's; readers ignore both blocks in older files. The
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

from cassettes import providers
from cassettes.parsing import RoundTrip, parse_exchange
from cassettes.recording._redactor import Redactor
from cassettes.storage import (
    CassetteFile,
    HistoryEncoder,
    depth_safe_record,
    dumps_record,
    exchange_to_record,
    read_records,
)
from cassettes.wire import Exchange, decode_exchange

__all__ = ["CassetteWriter"]

#: How many recent round trips the writer keeps as bases for incremental parsing.
_RECENT = 64


class CassetteWriter:
    """Appends round trips to a cassette file. Thread-safe; one line per ``append``."""

    def __init__(
        self,
        path: str | Path,
        meta: dict[str, Any] | None = None,
        redactor: Redactor | None = None,
        fsync: bool = False,
        *,
        requests: bool = True,
    ) -> None:
        self.path = Path(path)
        #: Whether :meth:`append` parses each round trip (and returns its parse). Nothing stored
        #: needs it (a reader parses what it reads): the recorder passes ``False`` and parses
        #: nothing.
        self.requests = requests
        self.redactor = redactor or Redactor()
        self._lock = threading.Lock()
        self._encoder = HistoryEncoder()
        # the latest round trips, bases for incremental parsing
        self._recent: dict[int, RoundTrip] = {}
        self._seq = 0
        if self.path.exists() and self.path.stat().st_size > 0:
            self._resume()
        self._file = CassetteFile(self.path, meta, fsync)

    @property
    def fsync(self) -> bool:
        return self._file.fsync

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

    def _encode_request(
        self, ex: Exchange, seq: int
    ) -> tuple[dict[str, Any] | None, RoundTrip | None]:
        """Encode the request body (history delta when it extends an earlier request) and return
        that earlier round trip when it is at hand, so only the appended part gets parsed."""
        body = ex.request_json()
        if not isinstance(body, dict) or ex.request_json_cut:
            return None, None  # (a body cut at the walk bound is stored raw: exchange_to_record)
        form = self._encoder.encode(seq, body, self._history_key(ex, body))
        delta = form.get("delta")
        if delta is None:
            return form, None
        ex.history_delta = {
            "base": delta["base"],
            "keep": delta["keep"],
            "appended": len(delta["append"]),
        }
        if delta.get("rewritten"):
            ex.history_delta["rewritten"] = True
        return form, self._recent.get(delta["base"])

    def append(self, ex: Exchange) -> RoundTrip | None:
        """Decode, redact, encode, parse (unless :attr:`requests` is false: then ``None``) and
        write one round trip; returns its parsed round trip."""
        decode_exchange(ex)
        with self._lock:
            seq = self._seq
            self._seq += 1
            clean = self.redactor.exchange(ex)
            clean.seq = seq
            try:
                form, base = self._encode_request(clean, seq)
            except orjson.JSONEncodeError:
                # History items nested deeper than orjson writes cannot be hashed for the delta
                # encoding: the body is stored whole (raw, see depth_safe_record) instead.
                form, base = None, None
            rt = parse_exchange(clean, base) if self.requests else None
            if rt is not None:
                # A base for a later request needs only the request side: keeping the response too
                # held up to _RECENT whole responses (a 100 MB stream each) in the writer's memory.
                self._recent[seq] = (
                    rt.model_copy(update={"response": None}) if rt.response is not None else rt
                )
                while len(self._recent) > _RECENT:
                    self._recent.pop(next(iter(self._recent)))
            rec = exchange_to_record(clean, seq, request_form=form)
            try:
                data = dumps_record(rec)
            except orjson.JSONEncodeError:
                data = dumps_record(depth_safe_record(rec, clean))
            self._file.append(data)
            return rt

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> CassetteWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
