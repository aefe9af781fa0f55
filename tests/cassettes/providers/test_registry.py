"""The registry (:mod:`cassettes.providers`): a recogniser that raises is a labelled error, not a
silent 0 (issue 47), and detecting never raises, so the recorder keeps the agent's traffic
flowing."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import SplitResult, urlsplit

import orjson
import pytest

from looptap.cassettes import providers
from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.wire import Exchange

CHAT = "http://localhost:11434/api/chat"
BODY = {"model": "qwen3:8b", "messages": [{"role": "user", "content": "hi"}], "stream": False}


@pytest.fixture
def broken_ollama(monkeypatch: pytest.MonkeyPatch) -> providers.Provider:
    adapter = providers.by_family("ollama")
    assert adapter is not None

    def recognise(method: str, url: SplitResult, body: Any) -> int:
        raise KeyError("done_reason")

    monkeypatch.setattr(adapter, "recognise", recognise)
    return adapter


def test_the_request_is_the_ollama_adapters() -> None:
    assert providers.detect("POST", urlsplit(CHAT), BODY) is providers.by_family("ollama")


def test_a_recogniser_that_raises_is_named_in_the_errors(broken_ollama: providers.Provider) -> None:
    errors: list[str] = []
    found = providers.detect("POST", urlsplit(CHAT), BODY, errors)
    assert found is not broken_ollama
    assert errors == [
        "the ollama adapter's recogniser raised KeyError: 'done_reason'; left out of detection"
    ]


def test_without_a_list_it_is_logged(
    broken_ollama: providers.Provider, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="looptap.providers"):
        providers.detect("POST", urlsplit(CHAT), BODY)
    assert [r.getMessage() for r in caplog.records] == [
        "the ollama adapter's recogniser raised KeyError: 'done_reason'; left out of detection"
    ]


def test_the_round_trip_carries_it(broken_ollama: providers.Provider) -> None:
    """What ``show`` prints: the parser puts the failure among the round trip's analysis errors."""
    answer = {
        "model": "qwen3:8b",
        "message": {"role": "assistant", "content": "hello"},
        "done": True,
    }
    ex = Exchange(
        "POST",
        CHAT,
        request_body=orjson.dumps(BODY),
        status=200,
        response_chunks=[(0.1, orjson.dumps(answer))],
    )
    rt = parse_exchange(ex)
    assert rt.family != "ollama"
    assert (
        "the ollama adapter's recogniser raised KeyError: 'done_reason'; left out of detection"
        in rt.analysis_errors
    )


def test_an_exception_without_text_is_still_named(monkeypatch: pytest.MonkeyPatch) -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    def recognise(method: str, url: SplitResult, body: Any) -> int:
        raise Unprintable

    adapter = providers.by_family("ollama")
    monkeypatch.setattr(adapter, "recognise", recognise)
    errors: list[str] = []
    providers.detect("POST", urlsplit(CHAT), BODY, errors)
    assert errors == ["the ollama adapter's recogniser raised Unprintable; left out of detection"]
