"""One intervention of ``looptap why``: what a fork changes at which turn, what it may send live,
and why it cannot run when it cannot (docs/why.md "Interventions");
:mod:`cassettes.why._interventions` makes them from a run's findings.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from ..hints import command_line, count

__all__ = ["Intervention"]


@dataclass
class Intervention:
    layer: str
    conversation: str
    turn: int
    #: What is changed, in a few words.
    what: str
    #: ``e-resample``, ``e-model``, ``a-cap``, ``a-retry`` (``a-retried``: one the client made
    #: itself, context), ``c-restore-result``,
    #: ``c-restore-answer``, ``c-continue``, ``c-await``; ``c-refused`` (a request the API
    #: refused, listed), ``c-recovered`` (one the client then recovered from: context);
    #: ``together`` (repairs combined: :mod:`cassettes.why._together`), ``confirm`` (the user's
    #: fixed agent: :mod:`cassettes.why._confirm`).
    kind: str
    #: The finding it answers, if any.
    finding: str | None = None
    #: ``--edit`` specs the fork makes.
    edits: list[str] = field(default_factory=list)
    #: ``--model`` of the fork (``None``: the recorded model).
    model: str | None = None
    #: The recorded round trips the branch re-runs live, by seq (what the budget estimates:
    #: :func:`cassettes.why._suspects.live_turns`, and the conversations that hear a changed
    #: answer: :func:`cassettes.why._suspects.heard`).
    seqs: list[int] = field(default_factory=list)
    #: Those it may reach at most (held turns, linked conversations: served while they match);
    #: empty: ``seqs``.
    reach: list[int] = field(default_factory=list)
    #: An E re-sample whose answer another conversation hears: the seqs it re-runs when the model
    #: says the recorded words again (those conversations then served); empty: ``seqs``.
    recorded: list[int] = field(default_factory=list)
    #: The chance that such a re-sampled answer comes back word for word
    #: (:func:`cassettes.why._suspects.said_again`); 0: any change is expected to reach them.
    repeat: float = 0.0
    #: Requests a sample may send beyond those (the continuations of a cut answer, at most).
    extra: int = 0
    #: The change lifts the token cap as well (a combination with ``a-cap``): the answer the cap cut
    #: is not expected to need a continuation (:attr:`expected_extra` 0; the at-most keeps them).
    cap_lifted: bool = False
    #: Why it cannot run (``None``: it can).
    missing: str | None = None
    #: What tells it from another of its kind at the same turn (the call a result is put back for,
    #: the finding's code).
    tag: str = ""
    #: What shows it, beside the finding (a refused request: the API's own message).
    evidence: str | None = None
    #: Why it may not be right even where it runs (its substitute cannot be what the recording
    #: lacked: a failed tool call answered with another query's answer): a flip still shows a
    #: change there flips it, no flip settles nothing (the verdict says so).
    caveat: str | None = None
    #: How a fix would be tested when the repair needs what only the user knows (a refused
    #: request: the ``--edit`` or ``--model`` of a fork at its turn), as the words of the
    #: command (quoted once where printed: :func:`cassettes.hints.command_line`); empty: none.
    fix: list[str] = field(default_factory=list)
    #: Only this turn re-sampled: the later turns of its conversation held (served as recorded
    #: while their requests still match: the ``…:hold`` cursor), so E re-samples of one
    #: conversation are not nested in each other.
    hold: bool = False
    #: A combination of repairs (``together``): its members' keys.
    parts: list[str] = field(default_factory=list)
    #: Before the cursor, a request that differs from the recording goes live (its conversation
    #: from there) instead of failing the fork (the ``…:diverge`` cursor): a confirmation's fixed
    #: agent, whose fix may show before the verdict's turn.
    diverge: bool = False
    #: A confirm's fork at a turn the recording holds no answer to (the API refused it) that ends
    #: its conversation: what a run sends past it is not in the recording; the first run measures
    #: it (:func:`cassettes.why._keep.run_all`).
    past_end: bool = False
    #: Of :attr:`edits`, those whose value is a text taken from the recording, never a file's
    #: name (one that starts with ``@`` too): the branches pass them by a file of their own.
    literal: list[str] = field(default_factory=list)

    @property
    def cursor(self) -> str:
        return (
            f"conversation={self.conversation}:turn={self.turn}"
            + ":hold" * self.hold
            + ":diverge" * self.diverge
        )

    @property
    def options(self) -> str:
        """The fork's options as the dry run prints them (`` [--edit …] --model …``; each word
        quoted once: an edit names a recorded call id or tool)."""
        edits = [w for e in self.edits for w in ("--edit", e)]
        return (f" [{command_line(edits)}]" if edits else "") + (
            f" {command_line(['--model', self.model])}" if self.model else ""
        )

    @property
    def expected_extra(self) -> int:
        """Of :attr:`extra`, how many a sample is expected to send: a cut answer continued once,
        none when the cap is lifted too."""
        return 0 if self.cap_lifted else min(self.extra, 1)

    @property
    def live_requests(self) -> int:
        """The live requests one sample is expected to send: the recorded ones it re-runs, and
        :attr:`expected_extra` of its extra (at most :attr:`extra`)."""
        return len(self.seqs) + self.expected_extra

    @property
    def recorded_requests(self) -> int:
        """:attr:`live_requests` when a re-sampled answer is the recorded one (its hearers
        served)."""
        return len(self.recorded or self.seqs) + self.expected_extra

    def changed(self, samples: int) -> int:
        """Of ``samples``, how many are expected to change an answer other conversations hear
        (each, unless the answer may come back as recorded: :attr:`repeat`)."""
        return round(samples * (1 - self.repeat)) if self.recorded else samples

    def expected(self, samples: int) -> int:
        """The live requests ``samples`` samples are expected to send (the budget's headline)."""
        changed = self.changed(samples)
        return self.live_requests * changed + self.recorded_requests * (samples - changed)

    @property
    def most_requests(self) -> int:
        """The live requests one sample may send at most (what the limits are kept against)."""
        return max(len(self.reach), len(self.seqs)) + self.extra

    def cost(self, samples: int) -> str:
        """What ``samples`` samples of it send live, said (``--dry-run``'s line of it)."""
        n, same, most = (x * samples for x in (self.live_requests, self.recorded_requests,
                                               self.most_requests))  # fmt: skip
        per = f"{len(self.seqs)}" + (
            f" + {count(self.expected_extra, 'continuation')}" if self.expected_extra else ""
        )
        if same == n:
            return f"{count(n, 'live request')} ({per} × {count(samples, 'sample')})" + (
                f"; at most {most}" if most > n else ""
            )
        changed = self.changed(samples)
        return (
            f"{count(self.expected(samples), 'live request')} expected ({changed} of "
            f"{count(samples, 'sample')} expected to change the answer another conversation "
            f"hears, said again word for word with chance {self.repeat:.0%}); {same} if each "
            f"comes back as recorded, {n} if each changes"
            + (f"; at most {most}" if most > n else "")
        )

    @property
    def key(self) -> str:
        """A stable name (the branch files and the state file use it)."""
        extra = "".join(f"-{x}" for x in (self.tag, self.model) if x)
        return re.sub(
            r"[^A-Za-z0-9._-]",
            "_",
            f"{self.layer}-{self.conversation}-t{self.turn}-{self.kind}{extra}",
        )[:160]

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "layer": self.layer,
            "conversation": self.conversation,
            "turn": self.turn,
            "what": self.what,
            "kind": self.kind,
            "finding": self.finding,
            "cursor": self.cursor,
            "edits": list(self.edits),
            "model": self.model,
            "live_requests_per_sample": self.live_requests,
            "as_recorded_per_sample": self.recorded_requests,
            "said_again_chance": round(self.repeat, 3),
            "at_most_per_sample": self.most_requests,
            "runnable": self.missing is None,
            "missing": self.missing,
            "evidence": self.evidence,
            "caveat": self.caveat,
            # the words as a shell reads them (JSON escapes what a terminal would act on)
            "fix": shlex.join(self.fix) if self.fix else None,
            **({"together": list(self.parts)} if self.parts else {}),
        }
