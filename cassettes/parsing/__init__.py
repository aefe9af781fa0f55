"""Raw bytes to meaning: one exchange parsed through its provider (``roundtrip``) into the
normalised models (:mod:`cassettes.models`), and parse once (``sealed``: the writer's parse reused
by readers). The adapters themselves live in ``cassettes/providers/``."""
