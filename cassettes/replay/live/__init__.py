"""Requests sent to a live upstream (past a fork's cursor, or new episodes being recorded): the
HTTP/1.1 client (``forward``) and the WebSocket one (``wslive``), and what a request sent live is
changed into: what-if edits (``edits``), a request continuing an answer the live upstream never
gave sent self-contained (``chains``), an answer cut at the token cap continued (``continuation``).

Used by the replay server and by the fork's cursor alike; imports neither.
"""
