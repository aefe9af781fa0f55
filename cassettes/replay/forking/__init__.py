"""Forking and comparing runs: a fork's cursor in the replay server (``cursor``), ``looptap run
--from`` (``fork``) and ``--repeat`` (``repeat``), a branch beside its origin for the inspector
(``forkview``), where two runs diverge (``rundiff``, ``looptap diff``; what it finds and its report:
``divergence``; what a fork itself changed: ``forkchanges``), the recorded requests sent to another
model (``compare``, ``looptap compare``) and rules proposed from two recordings (``propose``,
``looptap rules propose``), all reading two runs through ``lineup``.

Built on the serving side (:mod:`cassettes.replay.serving`), which never imports this package.
"""
