"""The one way the recorder (addon, writer process, launcher, CLI) says anything on stderr.

Every message goes through the logger ``looptap.recorder``, whose filter redacts it (the same
:class:`~cassettes.recording._redactor.Redactor` as the cassette: credentials in URLs, known key
formats, and every value this process's redactor learned, e.g. a key removed from a header) and
cleans it with
:func:`cassettes.untrusted.clean_line` (URLs and error texts are wire data: controls are shown,
never emitted), then cuts it to one bounded line. The filter sits on the logger itself, so a
message logged there directly is cleaned too.

Under ``looptap run``/``record`` (and in the writer process) :func:`to_stderr` sends the logger to
stderr as ``looptap: …`` lines. With the addon loaded into ``mitmdump``/``mitmweb`` nothing is
installed: the records propagate to mitmproxy's own log (errors at error level).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..cassettes.recording import Redactor

__all__ = ["LOG", "emit", "error", "learn_headers", "safe", "set_redactor", "to_stderr"]

LOG = logging.getLogger("looptap.recorder")
LOG.setLevel(logging.INFO)

#: Longest message printed (a body embedded in an exception text is cut here).
MAX_CHARS = 500

_redactor: Redactor | None = None


def _get() -> Redactor:
    global _redactor
    if _redactor is None:
        from ..cassettes.recording import Redactor

        _redactor = Redactor()
    return _redactor


def set_redactor(redactor: Redactor) -> None:
    """Use ``redactor`` (the writer's, or one configured with ``--redact-header``) for messages."""
    global _redactor
    _redactor = redactor


def learn_headers(headers: Iterable[tuple[str, str]]) -> None:
    """Let the message redactor learn the credentials in these headers (a flow whose capture
    failed: its key must not reach the message about it)."""
    try:
        _get().headers([(str(k), str(v)) for k, v in headers])
    except Exception:
        pass  # learning is best effort; the known formats are still masked


def safe(text: str) -> str:
    """``text`` fit for stderr: URLs redacted, learned values and key formats masked, one line,
    controls shown, at most :data:`MAX_CHARS` characters."""
    from ..cassettes.untrusted import clean_line

    r = _get()
    try:
        text = r.scrub(" ".join(r.url(w) if "://" in w else w for w in text.split(" ")))
    except Exception:
        text = "(a message that could not be redacted was withheld)"
    return clean_line(text)[:MAX_CHARS]


class _Redacting(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:
            msg = str(record.msg)
        record.msg = safe(msg)
        record.args = None
        record.exc_info = record.exc_text = None  # a traceback would carry raw wire text
        return True


LOG.addFilter(_Redacting())


class _Stderr(logging.Handler):
    """Writes to the *current* ``sys.stderr`` (tests swap it) and flushes each line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"looptap: {record.getMessage()}\n")
            sys.stderr.flush()
        except Exception:
            pass


def to_stderr() -> None:
    """Print the recorder's messages on stderr (``looptap run``/``record``, the writer process)
    instead of handing them to mitmproxy's log."""
    if not any(isinstance(h, _Stderr) for h in LOG.handlers):
        LOG.addHandler(_Stderr())
    LOG.propagate = False


def emit(text: str, level: int = logging.INFO) -> None:
    """Say ``text`` (redacted and cleaned by the logger's filter)."""
    LOG.log(level, text)


def error(text: str) -> None:
    emit(text, logging.ERROR)
