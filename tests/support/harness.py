"""Helpers shared by the recorder's end-to-end tests (fixtures are in tests/proxy/conftest.py)."""

from __future__ import annotations

import json
import subprocess
from typing import Any


def outputs(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """The JSON lines a client script printed."""
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
