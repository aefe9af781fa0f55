"""``looptap why``: which layer made a recorded run fail, shown by changing it and running again
(docs/why.md).

The run's findings and turns give the suspects; each suspect becomes an *intervention* (a fork
of the run at one turn with one thing changed: the model's emission re-sampled (E), the API's
answer replaced by a clean one (A), the client's dispatch repaired as the finding says it should
have been (C)), run K times; the outcome the user names is judged on every branch, and the
verdict is how often each intervention flipped it, with a Wilson interval.

The core here computes (:mod:`.outcome`, :mod:`.suspects`, :mod:`.interventions`, :mod:`.stats`,
:mod:`.budget`, :mod:`.verdict`) and keeps the output directory (:mod:`.state`); :mod:`.branches`
starts the processes (the real fork, ``looptap run --from``, in the recorder's environment, as the
pytest plugin starts the recorder); :mod:`.cli` is the command. Nothing here imports mitmproxy.
"""
