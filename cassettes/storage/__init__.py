"""Files of round trips: the cassette's record format and migrations (``codec``), its fields
checked (``validation``), appends and forgiving reads (``store``), the offset index for
incremental reading of large files (``index``), vcrpy cassettes (``vcr``), mitmproxy flow files
(``mitmflow``) and the paths looptap writes (``paths``)."""
