"""Testing an agent with pytest: the looptap plugin (``plugin``, the one public module: the
``looptap`` pytest11 entry point, its fixture, marker and ``--looptap-*`` options) over private
modules behind this façade (its names pinned by tests/replay/test_testing_surface.py): pytest's
stash keys (``_keys``), the core spared pytest's assertion rewriting (``_rewrite``), a test's
session (``_session``) with its options (``_options``) and failure report (``_report``), the
recorder it starts as a child process (``_recorder``) and the recorder's ready file that says where
it listens (``_ready``; ``looptap record --ready-file``).

Importing this package imports nothing (PEP 562: a name loads its module on first use): the plugin
loads in every pytest session, and the recorder's start takes the ready file only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cassettes.lazy import on_first_use

# Each name with the private module that defines it, loaded on first use (PEP 562).
_MODULES = {
    "_ready": (
        "SCHEMA VERSION Ready ReadyListener bare_url check_ready_path clear_stale read_ready "
        "remove_ready write_ready"
    ),
    "_recorder": "RecorderProcess SessionCassette how_to_install recorder_python",
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names.split()}

if TYPE_CHECKING:
    from cassettes.replay.testing._ready import (
        SCHEMA,
        VERSION,
        Ready,
        ReadyListener,
        bare_url,
        check_ready_path,
        clear_stale,
        read_ready,
        remove_ready,
        write_ready,
    )
    from cassettes.replay.testing._recorder import (
        RecorderProcess,
        SessionCassette,
        how_to_install,
        recorder_python,
    )


__getattr__ = on_first_use(__name__, _EXPORTS)


__all__ = [
    "SCHEMA",
    "VERSION",
    "Ready",
    "ReadyListener",
    "RecorderProcess",
    "SessionCassette",
    "bare_url",
    "check_ready_path",
    "clear_stale",
    "how_to_install",
    "read_ready",
    "recorder_python",
    "remove_ready",
    "write_ready",
]
