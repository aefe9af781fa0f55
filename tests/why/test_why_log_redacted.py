"""Issue 101, item 1: what ``why`` keeps of a branch's output (``KEY.K.jsonl.log``: the agent's
stdout and stderr, with ``looptap run``'s) and of a long edit (``KEY.editN.txt``) reaches the
disk as the redactor passes it, a line at a time. Before (f29135f5) the branch's output went to the
log as it came: a URL's password and a bot token in a URL's path were on disk."""

from __future__ import annotations

import sys
from pathlib import Path

from looptap.cassettes.why._branches import Branches
from looptap.cassettes.why._intervention import Intervention
from looptap.cassettes.why._outcome import Outcome

PASSWORD = "Vw93kLq0ZpXr"
BOT = "7312284490:AAH" + "q9Lw2Xe7Rt4Yu1Io8Pa5Sd3Fg6Hj0Kl2"
NOTION = "ntn_" + "a8Kd02LqPz7XwB3nVt5MrY1cJ6eH9sUf4GiO0bNkQ2Ex"


class _Printing(Branches):
    """A branch whose command is an agent printing credentials (no fork: the log is the test)."""

    def command(self, i: Intervention, k: int, limit: int | None = None) -> list[str]:
        script = (
            f"import sys; print('GET https://bob:{PASSWORD}@db.example.com/x')\n"
            f"print('https://api.telegram.org/bot{BOT}/getMe', flush=True)\n"
            f"print('token', {NOTION!r}, file=sys.stderr)\n"
            "sys.stdout.write('x' * 3_000_000 + '\\n'); print('done')"
        )
        return [sys.executable, "-c", script]


def test_a_branchs_output_reaches_its_log_redacted(tmp_path: Path) -> None:
    runner = _Printing(tmp_path / "run.jsonl", ["agent"], Outcome("exit", "0"), tmp_path)
    i = Intervention("E", "c1", 1, "resample", "e-resample", seqs=[1])
    result = runner.one(i, 0)
    log = tmp_path / result["log"]
    text = log.read_text()
    assert PASSWORD not in text and BOT[:12] not in text and NOTION[:12] not in text, text[:400]
    assert "https://bob:[REDACTED]@db.example.com/x" in text
    assert text.rstrip().endswith("done")  # a line over the copy's bound is read through
    assert log.stat().st_mode & 0o777 == 0o600


def test_a_long_edit_is_kept_redacted(tmp_path: Path) -> None:
    runner = Branches(tmp_path / "run.jsonl", ["agent"], Outcome("exit", "0"), tmp_path)
    value = '[{"role": "user", "content": "use ' + NOTION + '"}]' + " " * (17 << 10)
    i = Intervention("E", "c1", 1, "restore", "c-restore-result", edits=[f"0.messages={value}"])
    argv = runner.command(i, 0)
    edit = Path(argv[argv.index("--edit") + 1].split("=@", 1)[1])
    assert NOTION not in edit.read_text() and "[REDACTED]" in edit.read_text()
