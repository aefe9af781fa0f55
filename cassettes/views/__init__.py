"""A run for people and tools: ``show`` text and the ``show --json`` object (``view``, ``schema``),
turn summaries, search, timelines and token growth."""
