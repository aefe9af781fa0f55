"""A run for people and tools: ``show`` text and the ``show --json`` object (``view``), turn summaries, search, timelines and token growth."""
