"""Which recorded round trip answers a request, and how two requests differ: the request key
(``requestkey``), the matcher (``matcher``) over recordings in memory or served from the offset
index (``indexed``), the JSON-path diff (``jsondiff``), the layer a difference implicates
(``verdicts``), what the tolerant prefix and the rules tolerate (``tolerance``, ``tolerated``,
``userrules``).

Built on :mod:`cassettes.matching` (the user's rules, the volatile detectors); used by the replay
server, the fork and ``looptap diff`` alike.
"""
