"""The redactor's two nets by value: the secrets it learned, and the known formats.

:class:`Secrets` remembers every literal secret removed by name (for the life of the redactor);
:class:`Scrubber` masks them wherever else they appear, as written or percent-encoded or behind
JSON escapes, and masks whatever the detector ``looptap verify`` uses finds
(:mod:`cassettes.recording._detector`: gitleaks' ruleset and looptap's rules for LLM vendors' keys,
plus configured patterns). The nets by name are the other parts of the pipeline
(:mod:`cassettes.recording._bodies`: bodies and streams; :mod:`cassettes.recording._redactor`:
headers and URLs, and the :class:`~cassettes.recording._redactor.Redactor` composing them all).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Set
from urllib.parse import quote

from ._credentials import REDACTED
from ._detector import Detector, default_detector
from ._streams import merge

__all__ = ["Scrubber", "Secrets", "detector"]


def detector(extra_patterns: Iterable[str] = ()) -> Detector:
    """The shared secret detector (:mod:`cassettes.recording._detector`: gitleaks' ruleset and
    looptap's), plus ``extra_patterns``: what ``looptap verify`` reports is what the redactor
    masks."""
    return default_detector().with_patterns(extra_patterns)


class Secrets:
    """The literal secrets a redactor learned: every value it removed by name, and the pieces of
    one (a header's value split at its separators), for the scrub to mask wherever else they
    appear."""

    def __init__(self) -> None:
        self._values: set[str] = set()

    def learn(self, value: str) -> None:
        """The pieces of ``value`` that may be a secret (8 characters or more, not a scheme's
        name)."""
        for piece in re.split(r"[\s,;=]+", value):
            piece = piece.strip().strip('"')
            if len(piece) >= 8 and piece.lower() not in ("bearer", "basic") and piece != REDACTED:
                self._values.add(piece)

    def add(self, secret: str) -> None:
        """``secret`` as it is (a span the scrub found, already judged one)."""
        self._values.add(secret)

    def cut_at_end(self, text: str, shortest: int = 3) -> int | None:
        """Where the first characters of a learned secret end ``text`` (a body cut in it), at
        least ``shortest`` of them; ``None`` if none does."""
        best: int | None = None
        for secret in self._values:
            window = text[-(len(secret) - 1) :] if len(secret) > shortest else ""
            i = window.find(secret[:shortest])  # (each start of it, the longest first: one pass)
            while i >= 0 and not secret.startswith(window[i:]):
                i = window.find(secret[:shortest], i + 1)
            if i >= 0:
                at = len(text) - len(window) + i
                best = at if best is None else min(best, at)
        return best

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


class Scrubber:
    """Masks the literal secrets learned and every known-format secret in text."""

    def __init__(self, secrets: Secrets, detector: Detector) -> None:
        self._secrets = secrets
        #: Known formats (gitleaks' rules and looptap's) and the configured patterns: the detector
        #: ``looptap verify`` scans with.
        self.detector = detector
        self._escaped_cache: dict[str, re.Pattern[str]] = {}

    def _escaped(self, secret: str) -> re.Pattern[str]:
        """A learned secret as it may be written inside a JSON string: any character as ``\\uXXXX``,
        ``/`` as ``\\/`` (an upstream echoing the key in an error, a stream's escaped text)."""
        pat = self._escaped_cache.get(secret)
        if pat is None:
            parts = []
            for c in secret:
                alts = [re.escape(c), f"\\\\u{ord(c):04x}", f"\\\\u{ord(c):04X}"]
                if c == "/":
                    alts.append(r"\\/")
                parts.append("(?:" + "|".join(alts) + ")")
            pat = self._escaped_cache[secret] = re.compile("".join(parts))
        return pat

    def scrub(self, text: str, token: str = REDACTED, learned: bool = True) -> str:
        """``text`` with each of its :meth:`spans` replaced by ``token`` (``text`` itself when it
        holds none)."""
        pieces: list[str] = []
        pos = 0
        for s, e in self.spans(text, learned):
            pieces += [text[pos:s], token]
            pos = e
        return "".join(pieces) + text[pos:] if pieces else text

    def scrub_bytes(self, data: bytes) -> bytes:
        if not data:
            return data
        text = data.decode("utf-8", "surrogateescape")
        out = self.scrub(text)
        return data if out == text else out.encode("utf-8", "surrogateescape")

    def spans(
        self, text: str, learned: bool = True, present: Set[str] | None = None
    ) -> list[tuple[int, int]]:
        """Merged (start, end) spans of every secret in ``text``: the values learned (unless not
        ``learned``), then what the detector finds in the rest (a format's match never takes a
        learned value's neighbours: ``ya29.…`` would take the ``.`` that ends a sentence;
        ``present``: the detector's keywords of ``text``, when known)."""
        found: list[tuple[int, int]] = []
        escaped = "\\" in text
        for secret in self._secrets if learned else ():
            for form in {secret, quote(secret, safe="")}:
                i = text.find(form)
                while i >= 0:
                    found.append((i, i + len(form)))
                    i = text.find(form, i + 1)
            if escaped:
                found.extend(m.span() for m in self._escaped(secret).finditer(text))
        rest = text
        if found:  # blanked for the detector, in place (its keywords then searched again)
            present = None
            found = merge(found)
            pieces: list[str] = []
            pos = 0
            for s, e in found:
                pieces += [text[pos:s], "\x00" * (e - s)]
                pos = e
            rest = "".join(pieces) + text[pos:]
        found += self.detector.spans(rest, present)
        return merge(found + self.detector.encoded_spans(rest))
