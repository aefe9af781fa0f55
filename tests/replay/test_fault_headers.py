"""The rate-limit and retry headers of an injected fault, for every API: reset times are relative
to the moment the fault is sent, as the APIs' are (issue 27 item 6): a time is never in the past,
a wait is the fault's ``retry-after``."""

from __future__ import annotations

import re
import time
from datetime import datetime

import pytest

from looptap.cassettes import providers
from looptap.cassettes.providers import reset_at

_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
_WAIT = re.compile(r"^(\d+(\.\d+)?)(ms|s)?$")


def _families() -> list[str]:
    return list(providers.FAMILIES)


@pytest.mark.parametrize("family", _families())
@pytest.mark.parametrize("kind", ["rate_limit", "overloaded", "server_error"])
@pytest.mark.parametrize("wait", [0.0, 1.0, 30.0])
def test_reset_and_retry_headers_are_relative_to_now(family: str, kind: str, wait: float) -> None:
    adapter = providers.by_family(family)
    assert adapter is not None
    before = time.time()
    headers = adapter.replay.fault_headers(kind, wait)
    after = time.time()
    for name, value in headers:
        low = name.lower()
        if "reset" not in low and low != "retry-after":
            continue
        if _TIME.match(value):
            at = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            assert before + wait - 1 <= at <= after + wait + 1, (family, name, value)
        else:
            m = _WAIT.match(value)
            assert m is not None, (family, name, value)
            seconds = float(m.group(1)) / (1000 if m.group(3) == "ms" else 1)
            assert seconds == pytest.approx(wait), (family, name, value)


def test_reset_at_rounds_up_and_is_rfc3339() -> None:
    assert reset_at(1.0, now=1767225599.2) == "2026-01-01T00:00:01Z"
    assert reset_at(0.0, now=1767225600.0) == "2026-01-01T00:00:00Z"
    assert reset_at(-5.0, now=1767225600.0) == "2026-01-01T00:00:00Z"  # never before now
