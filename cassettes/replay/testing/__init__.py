"""Testing an agent with pytest: the looptap plugin (``plugin``: the ``looptap`` fixture and marker,
the ``--looptap-*`` options, registered as the ``looptap`` pytest11 entry point), the recorder it
starts as a child process to record a cassette (``recording``), and the recorder's ready file that
tells it where the recorder listens (``ready``; ``looptap record --ready-file`` writes it).

Importing this package imports nothing: the plugin loads in every pytest session.
"""
