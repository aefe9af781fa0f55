"""``looptap compare RUN --model NAME``: the recorded requests sent to a candidate model, teacher
forced (each the recorded one, with the recorded history, so a divergence does not compound),
``--samples K`` times each, and the answers compared with the recording by layer (docs/fork.md,
"Compare, teacher-forced", says what is compared, sent, skipped, stopped and priced). No
re-exports; the modules:

- ``answer``: one answer read and its calls checked (JSON, the declared schema, offered at all),
  and when two answers agree (:data:`~.answer.TEXT_MEASURE` at :data:`~.answer.TEXT_THRESHOLD`
  for two texts);
- ``report``: a turn's samples beside the recorded answer, the figures, the verdict and the
  report (text and JSON);
- ``budget``: what would be sent and what it would cost, checked before anything is sent
  (``--max-requests``, ``--max-cost``; ``looptap why`` checks its own the same way);
- ``sending``: the turns sent; a failure of the setup (no connection, the credentials or the
  model refused) stops the comparison there.
"""
