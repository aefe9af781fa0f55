"""Replay, by what a user does: serve a cassette to the real agent code (``serving``), fork and
compare runs (``forking``, ``comparison``), test an agent with pytest (``testing``: the plugin),
with what they share below them: requests sent to a live upstream (``live``); ``command`` is
``looptap replay``'s handler (``cmd_replay``).

No re-exports: the pytest plugin lives under this package and loads in every test session, so
importing the package must import nothing. A caller names the module it uses
(``cassettes.replay.serving.server.ReplayServer``); the run class is :class:`cassettes.reading.Run`
(``cassettes.Run``).
"""
