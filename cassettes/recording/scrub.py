"""The redactor's two nets by value: the secrets it learned, and the known formats.

:class:`Secrets` remembers every literal secret removed by name (for the life of the redactor);
:class:`Scrubber` masks them wherever else they appear, as written or percent-encoded or behind
JSON escapes, and masks whatever the detector ``looptap verify`` uses finds
(:mod:`cassettes.recording.detector`: gitleaks' ruleset and looptap's rules for LLM vendors' keys,
plus configured patterns). The nets by name are the other parts of the pipeline
(:mod:`cassettes.recording.bodies`: bodies and streams; :mod:`cassettes.recording.redact`:
headers and URLs, and the :class:`~cassettes.recording.redact.Redactor` composing them all).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from urllib.parse import quote

from cassettes.recording.detector import Detector, default_detector
from cassettes.recording.names import REDACTED
from cassettes.recording.streams import merge

__all__ = ["SEEN_CHARS", "Scrubber", "Secrets", "detector"]

#: Joins the strings of a JSON body for one scrub: no known pattern matches a NUL or a newline.
_SEP = "\n\x00\n"
#: How much already-scrubbed text a redactor remembers (characters; a few agents' histories).
SEEN_CHARS = 64 << 20


def detector(extra_patterns: Iterable[str] = ()) -> Detector:
    """The shared secret detector (:mod:`cassettes.recording.detector`: gitleaks' ruleset and
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
        self._detector = detector
        self._escaped_cache: dict[str, re.Pattern[str]] = {}
        #: Scrubbed forms of JSON strings already seen, for the history an agent re-sends on every
        #: turn (valid while no new literal is learned; :meth:`scrub_strings`).
        self._seen: dict[str, str] = {}
        self._seen_chars = 0
        self._seen_literals = 0

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

    def scrub(self, text: str, token: str = REDACTED) -> str:
        escaped = "\\" in text
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, token)
            q = quote(secret, safe="")
            if q != secret and q in text:
                text = text.replace(q, token)
            if escaped:
                text = self._escaped(secret).sub(token, text)
        spans = merge(self._detector.spans(text))
        if spans:
            pieces: list[str] = []
            pos = 0
            for s, e in spans:
                pieces += [text[pos:s], token]
                pos = e
            pieces.append(text[pos:])
            text = "".join(pieces)
        return text

    def scrub_strings(self, texts: list[str]) -> list[str]:
        """:meth:`scrub` of each text, in one pass over the ones not seen before.

        An agent re-sends its whole history on every turn: scrubbing the raw body again each time
        cost milliseconds per round trip on a 200 KB history (13 patterns over every byte), now
        only the new messages are scanned. The new ones are joined with a separator no pattern
        crosses (checked: a different number of pieces falls back to one scrub per text).
        """
        if len(self._secrets) != self._seen_literals:
            self._seen.clear()
            self._seen_chars = 0
            self._seen_literals = len(self._secrets)
        seen = self._seen
        new = list(dict.fromkeys(t for t in texts if t and t not in seen))
        if new:
            if any(_SEP in t for t in new):
                done = [self.scrub(t) for t in new]
            else:
                done = self.scrub(_SEP.join(new)).split(_SEP)
                if len(done) != len(new):
                    done = [self.scrub(t) for t in new]
            for t, r in zip(new, done, strict=True):
                seen[t] = r
                self._seen_chars += len(t)
        out = [seen.get(t, t) for t in texts]
        while self._seen_chars > SEEN_CHARS and seen:  # forget the oldest first
            old = next(iter(seen))
            self._seen_chars -= len(old)
            del seen[old]
        return out

    def scrub_bytes(self, data: bytes) -> bytes:
        if not data:
            return data
        text = data.decode("utf-8", "surrogateescape")
        out = self.scrub(text)
        return data if out == text else out.encode("utf-8", "surrogateescape")

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Merged (start, end) spans of every secret in ``text``."""
        found: list[tuple[int, int]] = []
        escaped = "\\" in text
        for secret in self._secrets:
            for form in {secret, quote(secret, safe="")}:
                i = text.find(form)
                while i >= 0:
                    found.append((i, i + len(form)))
                    i = text.find(form, i + 1)
            if escaped:
                found.extend(m.span() for m in self._escaped(secret).finditer(text))
        found.extend(self._detector.spans(text))
        return merge(found)

    def forget_seen(self) -> None:
        """Drop the cache of strings already scrubbed (what was learned stays): for a redactor
        kept only to scrub a few lines later, such as a replay miss's."""
        self._seen.clear()
        self._seen_chars = 0
