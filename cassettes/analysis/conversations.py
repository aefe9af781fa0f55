"""Conversations as threading finds them: the public names of :mod:`cassettes.analysis.threading`
(how a round trip finds its conversation) and of the message keys it compares."""

from __future__ import annotations

from cassettes.analysis.message_keys import message_key, response_message, squashed
from cassettes.analysis.threading import Attempt, Link, Threader

__all__ = ["Attempt", "Link", "Threader", "message_key", "response_message", "squashed"]
