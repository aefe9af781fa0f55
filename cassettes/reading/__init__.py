"""Reading a run: ``open_run`` and :class:`~cassettes.reading.run.Run` (``run``), and the large or
growing run read a batch at a time (``incremental``)."""
