"""looptap's inspector: a Textual app that steps through a recorded run turn by turn.

It renders what :mod:`cassettes` computes (turns, the E/A/C views, findings, token-cost growth)
and computes nothing of its own. ``looptap inspect FILE`` starts it; :func:`inspector.app.build_app`
builds it for tests and embedding.
"""

from __future__ import annotations
