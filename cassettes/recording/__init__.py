"""The one recording pipeline (redact, delta-encode, parse, seal, append), the redactor (``redact``,
``bodies``, ``scrub``, ``names``, ``streams``) and its secret detector, and WebSocket sessions read
as turns (``websocket``)."""
