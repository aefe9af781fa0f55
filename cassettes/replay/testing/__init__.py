"""Testing an agent with pytest. Three public modules, imported by name (no re-exports: the plugin
loads in every pytest session, and this package's import must cost nothing):

- ``plugin``: the ``looptap`` pytest11 entry point, its fixture, marker and ``--looptap-*``
  options;
- ``recorder``: the recorder a test session starts as a child process (``RecorderProcess``,
  ``SessionCassette``, ``recorder_python``);
- ``ready``: the recorder's ready file that says where it listens (``looptap record
  --ready-file``), which the recorder's start writes.

Private modules behind the plugin: pytest's stash keys (``_keys``), the core spared pytest's
assertion rewriting (``_rewrite``), a test's session (``_session``) with its options
(``_options``) and failure report (``_report``).
"""
