"""``looptap run --from RUN@SEL --verify CMD``: forks judged by a command, across models, each in
its own tree (docs/fork.md, "Which model would have fixed it"). ``_plan`` (the rows and the budget,
before anything is sent), ``_command`` (the branches, through ``looptap why``'s
:class:`~cassettes.why.Branches`), ``_report`` (the text, the page), ``_api`` (the same from
Python: :func:`verify`). Nothing here imports mitmproxy."""

from ._api import verify
from ._command import Result, cmd_verify, verify_run

__all__ = ["Result", "cmd_verify", "verify", "verify_run"]
