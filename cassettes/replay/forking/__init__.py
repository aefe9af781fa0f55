"""Forking and comparing runs. No re-exports: a caller names the module it uses, so
``looptap replay`` loads only the cursor and the plan (the fork's report loads the analysis).

- ``cursor``: a fork's cursor in the replay server (the cursor as written and where it falls:
  ``placement``);
- ``fork``: ``looptap run --from`` (its plan handed to the replay server: ``plan``) and
  ``repeat``: ``--repeat``'s agreement of the branches;
- ``forkview``: a branch beside its origin, for the inspector;
- ``rundiff``: where two runs diverge (``looptap diff``; what it finds and its report:
  ``divergence``; what a fork itself changed: ``_forkchanges``);
- ``proposal``: rules proposed from two recordings (``looptap rules propose``);
- ``served``: the tool calls the replay server answered from the recording, kept and put back
  into the branch that they served;

all reading two runs through ``_lineup``. The recorded requests sent to another model are the
``compare`` subpackage's (``looptap compare``).

Built on the serving side (:mod:`cassettes.replay.serving`), which never imports this package.
"""
