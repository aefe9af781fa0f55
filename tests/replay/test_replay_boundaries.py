"""Replay's boundaries: it never names a provider (the adapters answer for their API: error
shapes, retry headers, volatile ids, key variables), and replay-only suites need no mitmproxy."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_NAMES = re.compile(r"(?i)\b(openai|anthropic|gemini|ollama|bedrock|api\.[a-z]+\.com)\b")


def test_replay_names_no_provider() -> None:
    files = sorted((ROOT / "cassettes" / "replay").rglob("*.py"))
    assert files
    for f in files:
        text = f.read_text()
        hit = _NAMES.search(text)  # docstrings and comments included
        assert hit is None, f"{f.relative_to(ROOT)} names a provider: {hit.group(0) if hit else ''}"
        assert "looptap.cassettes.providers." not in text, (
            f"{f.relative_to(ROOT)} imports an adapter module directly"
        )


def test_plugin_and_server_import_without_mitmproxy_or_the_proxy_package() -> None:
    code = (
        "import sys, looptap.cassettes.replay.testing.plugin, looptap.cassettes.replay\n"
        "from looptap.cassettes.replay.command import cmd_replay\n"
        "print(','.join(sorted(n for n in sys.modules if n.split('.')[0] in ('mitmproxy', 'proxy', "
        "'textual', 'inspector'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == ""
