"""``looptap compare``: teacher-forced samples from a candidate, compared with the recording by
layer (issue 31). The candidate is a scripted fake that calls one of two tools at random (seeded):
the agreement rates must match its probability within sampling error (a binomial bound, not a
tuned threshold). The budget guard and ``--dry-run`` send nothing (counted at the fake)."""

from __future__ import annotations

import math
import random
import re
from decimal import Decimal
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.cli import main
from looptap.cassettes.views import money
from looptap.cassettes.wire import Exchange
from tests.replay.conftest import SYSTEM, chat_exchange, chat_response, write
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

P_WEATHER = 0.7
TURNS, K = 8, 5


def _run(tmp_path: Path) -> Path:
    """Eight recorded turns, each answered with a call of get_weather."""
    exchanges = [
        chat_exchange(
            [SYSTEM, {"role": "user", "content": f"Weather in city {i}?"}],
            chat_response(call=(f"call_{i}", "get_weather", f'{{"city":"c{i}"}}')),
        )
        for i in range(TURNS)
    ]
    return write(tmp_path / "run.jsonl", exchanges)


@pytest.fixture
def candidate() -> ScriptedUpstream:
    rng = random.Random(20261123)

    def route(req: ScriptedRequest) -> Reply:
        city = req.user_texts()[-1].split()[-1].rstrip("?")
        if rng.random() < P_WEATHER:
            return Reply.tool("get_weather", {"city": f"c{city}"})
        return Reply.tool("get_time", {"city": f"c{city}"})

    return ScriptedUpstream(route)


def test_agreement_rates_match_the_candidates_probability(
    tmp_path: Path, candidate: ScriptedUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path)
    with candidate as fake:
        rc = main(
            [
                "compare",
                str(run),
                "--model",
                "cand-1",
                "--upstream",
                f"openai={fake.url}",
                "--samples",
                str(K),
                "--json",
            ]
        )
    assert rc == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert len(fake.log) == TURNS * K and {x.request.model for x in fake.log} == {"cand-1"}
    turns = doc["turns"]
    assert len(turns) == TURNS and all(len(t["samples"]) == K for t in turns)
    n = TURNS * K
    agree = sum(t["agreement"] * K for t in turns) / n
    bound = 3 * math.sqrt(P_WEATHER * (1 - P_WEATHER) / n)  # 3 sigma of a binomial proportion
    assert abs(agree - P_WEATHER) <= bound, (agree, bound)
    # self-agreement is the share of the commoner tool; the other tool is new to the client
    for t in turns:
        calls = [s["calls"][0]["name"] for s in t["samples"]]
        assert t["self_agreement"] == max(calls.count("get_weather"), calls.count("get_time")) / K
        new = (
            "the tool get_time (never called in the recording; not even offered by the request: "
            "the client has no handler for it)"
        )
        assert (new in t["new_to_client"]) == ("get_time" in calls)
        # the arguments asked for are the recorded ones
        assert t["agreement"] == calls.count("get_weather") / K


def test_the_budget_guard_and_dry_run_send_nothing(
    tmp_path: Path, candidate: ScriptedUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path)
    with candidate as fake:
        assert (
            main(
                [
                    "compare",
                    str(run),
                    "--upstream",
                    f"openai={fake.url}",
                    "--samples",
                    str(K),
                    "--max-requests",
                    str(TURNS * K - 1),
                ]
            )
            == 2
        )
        assert "over --max-requests" in capsys.readouterr().err
        assert (
            main(
                [
                    "compare",
                    str(run),
                    "--upstream",
                    f"openai={fake.url}",
                    "--samples",
                    str(K),
                    "--max-cost",
                    "0.000001",
                ]
            )
            == 2
        )
        assert "over --max-cost" in capsys.readouterr().err
        assert (
            main(
                [
                    "compare",
                    str(run),
                    "--upstream",
                    f"openai={fake.url}",
                    "--samples",
                    str(K),
                    "--dry-run",
                    "--model",
                    "cand-1",
                ]
            )
            == 0
        )
        out = capsys.readouterr().out
        assert fake.log == []
    assert out.count("would send 5×") == TURNS and "with model cand-1" in out


def test_the_text_report_says_it_by_layer(
    tmp_path: Path, candidate: ScriptedUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path)
    with candidate as fake:
        assert (
            main(["compare", str(run), "--upstream", f"openai={fake.url}", "--samples", "2"]) == 0
        )
    out = capsys.readouterr().out
    assert (
        "agrees with the recording" in out
        and "  E recorded: get_weather" in out
        and "  A finish tool_calls" in out
    )


# --- arguments against the declared schema ------------------------------------------------------

#: What the candidate emits, per recorded turn: valid, off the schema (a number where the schema
#: wants a string; a required property missing), not JSON at all, equal to the recording.
SCHEMA_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}},
                "required": ["city"],
            },
        },
    }
]
ANSWERS: list[dict[str, object] | str] = [
    {"city": "Lyon"},
    {"city": 7},
    {"unit": "K"},
    '{"city": "Par',
    {"city": "c4"},
]


def _schema_run(tmp_path: Path) -> Path:
    exchanges = [
        chat_exchange(
            [SYSTEM, {"role": "user", "content": f"Weather in city {i}?"}],
            chat_response(call=(f"call_{i}", "get_weather", f'{{"city":"c{i}"}}')),
            tools=SCHEMA_TOOLS,
        )
        for i in range(len(ANSWERS))
    ]
    return write(tmp_path / "run.jsonl", exchanges)


@pytest.fixture
def shaky() -> ScriptedUpstream:
    def route(req: ScriptedRequest) -> Reply:
        i = int(req.user_texts()[-1].split()[-1].rstrip("?"))
        return Reply.tool("get_weather", ANSWERS[i])

    return ScriptedUpstream(route)


def test_arguments_are_checked_against_the_recorded_requests_schema(
    tmp_path: Path, shaky: ScriptedUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _schema_run(tmp_path)
    with shaky as fake:
        assert (
            main(
                [
                    "compare",
                    str(run),
                    "--upstream",
                    f"openai={fake.url}",
                    "--samples",
                    "2",
                    "--json",
                ]
            )
            == 0
        )
    doc = orjson.loads(capsys.readouterr().out)
    calls = [t["samples"][0]["calls"][0] for t in doc["turns"]]
    assert [c["json"] for c in calls] == [True, True, True, False, True]
    # not JSON: nothing to check
    assert [c["schema_valid"] for c in calls] == [True, False, False, None, True]
    assert calls[1]["schema_errors"] == ['$.city: 7 is not of type "string"']
    assert sorted(calls[2]["schema_errors"]) == [
        '$.unit: "K" is not one of ["C","F"]',
        "$: missing required property 'city'",
    ]
    assert calls[3]["parse_error"] and calls[3]["arguments"] == '{"city": "Par'
    assert all(c["offered"] for c in calls)
    # only the last answer is the recorded one
    assert [t["arguments"]["equal_to_recording"] for t in doc["turns"]] == [0, 0, 0, 0, 2]
    assert doc["arguments"] == {
        "calls": 10,
        "json": 8,
        "schema_checked": 8,
        "schema_valid": 4,
        "equal_to_recording": 2,
        "not_offered": 0,
    }
    # the recording's own call, checked the same way
    assert doc["turns"][0]["recorded"]["calls"][0]["schema_valid"] is True


def test_the_text_report_gives_the_argument_checks_by_turn_and_overall(
    tmp_path: Path, shaky: ScriptedUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _schema_run(tmp_path)
    with shaky as fake:
        assert main(["compare", str(run), "--upstream", f"openai={fake.url}"]) == 0
    out = capsys.readouterr().out
    assert (
        "  E arguments: 1 call; JSON 1/1; schema-valid 0/1; JSON-equal to the recording 0/1" in out
    )
    assert '  E 1× off the schema: get_weather: $.city: 7 is not of type "string"' in out
    # not JSON: not counted as checked
    assert "  E arguments: 1 calls; JSON 0/1; schema-valid 0/0 (" not in out
    assert (
        "E over all turns: 5 calls; JSON 4/5; schema-valid 2/4; JSON-equal to the recording 1/5"
        in out
    )


@pytest.mark.parametrize("family", ["anthropic", "gemini", "openai_responses"])
def test_each_familys_tool_declarations_are_read_for_the_schema(family: str) -> None:
    """The schema comes from the recorded request as its family declares tools (Anthropic's
    ``input_schema``, Gemini's ``functionDeclarations`` with OpenAPI upper-case types, Responses'
    flat ``function`` tools)."""
    from looptap.cassettes.models import ToolCall
    from looptap.cassettes.replay.forking.compare.answer import check_arguments, offered_tools
    from looptap.cassettes.wire import Exchange

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    url, body = {
        "anthropic": (
            "https://api.anthropic.com/v1/messages",
            {
                "model": "m",
                "max_tokens": 9,
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"name": "get_weather", "input_schema": schema}],
            },
        ),
        "gemini": (
            "https://generativelanguage.googleapis.com/v1beta/models/"
            "gemini-2.0-flash:generateContent",
            {
                "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                "tools": [
                    {
                        "functionDeclarations": [
                            {
                                "name": "get_weather",
                                "parameters": {
                                    "type": "OBJECT",
                                    "properties": {"city": {"type": "STRING"}},
                                    "required": ["city"],
                                },
                            }
                        ]
                    }
                ],
            },
        ),
        "openai_responses": (
            "https://api.openai.com/v1/responses",
            {
                "model": "m",
                "input": "hi",
                "tools": [{"type": "function", "name": "get_weather", "parameters": schema}],
            },
        ),
    }[family]
    tools = offered_tools(
        Exchange("POST", url, [("content-type", "application/json")], orjson.dumps(body))
    )
    assert [t.name for t in tools] == ["get_weather"]
    assert (
        check_arguments(
            ToolCall(name="get_weather", arguments={"city": "Oslo"}), tools
        ).schema_valid
        is True
    )
    bad = check_arguments(ToolCall(name="get_weather", arguments={"town": "Oslo"}), tools)
    assert bad.schema_valid is False and bad.schema_errors == [
        "$: missing required property 'city'"
    ]
    other = check_arguments(ToolCall(name="get_time", arguments={}), tools)
    assert other.offered is False and other.schema_valid is None


def test_a_saved_report_is_what_the_mcp_comparison_tool_reads(
    tmp_path: Path, shaky: ScriptedUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--report`` (no file: beside the run) saves what ``--json`` prints; ``looptap mcp``'s
    ``comparison`` answers from it, by the report's path or the run's, and sends nothing."""
    from looptap.cassettes.mcp import QueryError
    from looptap.cassettes.mcp.query import Runs, comparison

    run = _schema_run(tmp_path)
    with shaky as fake:
        assert (
            main(
                [
                    "compare",
                    str(run),
                    "--upstream",
                    f"openai={fake.url}",
                    "--samples",
                    "2",
                    "--report",
                    "--json",
                ]
            )
            == 0
        )
        printed = orjson.loads(capsys.readouterr().out)
        saved = tmp_path / "run.jsonl.compare.json"
        assert orjson.loads(saved.read_bytes()) == printed and printed["looptap"] == "compare"
        sent = len(fake.log)
        runs = Runs([tmp_path])
        by_run, by_report = (
            comparison(runs, "run.jsonl", 0, 20, 6000),
            comparison(runs, str(saved), 3, 1, 6000),
        )
        assert len(fake.log) == sent  # read-only: nothing sent
    assert (
        by_run["turns"] == 5
        and by_run["samples"] == 2
        and by_run["arguments"] == printed["arguments"]
    )
    turns = by_run["recorded"]["turns"]
    assert [t["seq"] for t in turns] == [0, 1, 2, 3, 4] and by_run["next_offset"] is None
    assert turns[1]["schema_violations"] == [
        {"n": 2, "violation": 'get_weather: $.city: 7 is not of type "string"'}
    ]
    assert (
        turns[1]["arguments"]["schema_valid"] == 0
        and turns[4]["arguments"]["equal_to_recording"] == 2
    )
    assert [t["seq"] for t in by_report["recorded"]["turns"]] == [3] and by_report[
        "next_offset"
    ] == 4
    other = tmp_path / "elsewhere.json"
    assert (
        main(
            [
                "compare",
                str(run),
                "--upstream",
                f"openai={fake.url}",
                "--report",
                str(other),
                "--dry-run",
            ]
        )
        == 0
    )
    assert not other.exists()  # a dry run compares nothing, so saves nothing
    with pytest.raises(QueryError, match="not a comparison report"):
        (tmp_path / "x.json").write_bytes(b"{}")
        comparison(runs, "x.json", 0, 20, 6000)


# --- issue 42: a comparison a user can choose a model by --------------------------------------
#
# The recorded model is gpt-4.1-mini; the candidate gpt-4.1 lists exactly 5× its prices in
# genai-prices (input $0.40 / $2.00, cached input $0.10 / $0.50, output $1.60 / $8.00 per million).

CHEAP, DEAR = "gpt-4.1-mini", "gpt-4.1"
#: Each recorded turn's usage: 1,000 input tokens of which 400 cached, 100 output.
PROMPT, CACHED, COMPLETION = 1000, 400, 100


def _answer(text: str | None = None, call: tuple[str, str, str] | None = None) -> bytes:
    msg: dict[str, object] = {"role": "assistant", "content": text}
    if call is not None:
        msg["tool_calls"] = [
            {"id": call[0], "type": "function", "function": {"name": call[1], "arguments": call[2]}}
        ]
    return orjson.dumps(
        {
            "id": "chatcmpl-r",
            "object": "chat.completion",
            "model": f"{CHEAP}-2025-04-14",
            "choices": [
                {"index": 0, "message": msg, "finish_reason": "tool_calls" if call else "stop"}
            ],
            "usage": {
                "prompt_tokens": PROMPT,
                "completion_tokens": COMPLETION,
                "total_tokens": PROMPT + COMPLETION,
                "prompt_tokens_details": {"cached_tokens": CACHED},
            },
        }
    )


def _priced_turn(
    i: int, status: int = 200, body: bytes | None = None, text: str | None = None
) -> Exchange:
    from tests.replay.conftest import CHAT_URL, chat_request

    return Exchange(
        "POST",
        CHAT_URL,
        [("content-type", "application/json")],
        chat_request([SYSTEM, {"role": "user", "content": f"Weather in city {i}?"}], model=CHEAP),
        status=status,
        response_headers=[("content-type", "application/json")],
        response_chunks=[
            (
                0.5,
                body
                if body is not None
                else _answer(
                    text=text,
                    call=None if text else (f"call_{i}", "get_weather", f'{{"city":"c{i}"}}'),
                ),
            )
        ],
        ttfb=0.4,
        duration=0.5,
    )


def _priced_run(tmp_path: Path, n: int = 4) -> Path:
    return write(tmp_path / "run.jsonl", [_priced_turn(i) for i in range(n)])


def _list_price(model: str) -> Decimal:
    """One recorded turn's usage at ``model``'s price, asked of genai-prices itself."""
    import genai_prices as gp

    usage = gp.Usage(input_tokens=PROMPT, cache_read_tokens=CACHED, output_tokens=COMPLETION)
    return gp.calc_price(usage, model_ref=model, provider_id="openai").total_price


@pytest.fixture
def weather() -> ScriptedUpstream:
    def route(req: ScriptedRequest) -> Reply:
        return Reply.tool(
            "get_weather", {"city": f"c{req.user_texts()[-1].split()[-1].rstrip('?')}"}
        )

    return ScriptedUpstream(route)


def test_the_candidate_is_priced_at_its_own_price(
    tmp_path: Path, weather: ScriptedUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    """The estimate is the candidate's price on the recorded usage (input, cached input, output):
    gpt-4.1 is 5× gpt-4.1-mini, so the same --max-cost lets the cheap one through and refuses the
    dear one, at its own figure; nothing is sent before the refusal."""
    run = _priced_run(tmp_path)
    cheap, dear = _list_price(CHEAP), _list_price(DEAR)
    assert dear == 5 * cheap  # the library's prices, as this test assumes them
    turns, k = 4, 2
    limit = cheap * turns * k * 2  # twice the recorded model's cost: under the candidate's
    with weather as fake:
        rc = main(
            [
                "compare",
                str(run),
                "--model",
                DEAR,
                "--upstream",
                f"openai={fake.url}",
                "--samples",
                str(k),
                "--max-cost",
                str(limit),
            ]
        )
        err = capsys.readouterr().err
        assert rc == 2 and fake.log == []
        assert (
            f"estimated {money(dear * turns * k)} at {DEAR}'s "
            f"price, over --max-cost {limit}: nothing sent" in err
        )
        assert f"the recording cost {money(cheap * turns * k)} for as many (×5.00)" in err
        rc = main(
            [
                "compare",
                str(run),
                "--model",
                CHEAP,
                "--upstream",
                f"openai={fake.url}",
                "--samples",
                str(k),
                "--max-cost",
                str(limit),
                "--json",
            ]
        )
        captured = capsys.readouterr()
        assert rc == 0 and len(fake.log) == turns * k
    # the candidate's host (a loopback fake) is no provider's: its price is by the model's name,
    # ``~``
    assert f"estimated cost {money(cheap * turns * k, True)} at {CHEAP}'s own price" in captured.err
    doc = orjson.loads(captured.out)
    # the recorded model at its own price
    assert {t["cost"]["recorded"] for t in doc["turns"]} == {f"{cheap:.6f}"}
    assert {t["cost"]["estimate"] for t in doc["turns"]} == {f"{cheap:.6f}"}


def test_a_candidate_without_a_price_is_said_and_refused_under_max_cost(
    tmp_path: Path, weather: ScriptedUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _priced_run(tmp_path)
    with weather as fake:
        args = [
            "compare",
            str(run),
            "--model",
            "local-model-7b",
            "--upstream",
            f"openai={fake.url}",
            "--max-cost",
            "5",
        ]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert fake.log == []
        assert (
            "the cost of 4 of 4 turns is unknown: no price: genai-prices" in err
            and "'local-model-7b'" in err
        )
        assert (
            "the candidate's price is unknown for 4 turns, "
            "so --max-cost 5 cannot be kept: nothing sent" in err
        )
        assert main([*args, "--allow-unknown-price"]) == 0  # told otherwise: sent
        assert len(fake.log) == 4
    out = capsys.readouterr().out
    assert "cost ratio unknown (no price)" in out.splitlines()[0]


class _Refusing:
    """A loopback upstream answering every request ``status`` with an OpenAI error body; counts
    them."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.requests = 0

    def __enter__(self) -> _Refusing:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.requests += 1
                said = {
                    401: ("Incorrect API key provided.", "invalid_api_key"),
                    403: ("Your key may not use this model.", "forbidden"),
                    404: ("The model `gpt-4.1-mini` does not exist.", "model_not_found"),
                }.get(outer.status, ("Unsupported parameter: 'store'.", "unsupported_parameter"))
                body = orjson.dumps(
                    {
                        "error": {
                            "message": said[0],
                            "type": "invalid_request_error",
                            "code": said[1],
                        }
                    }
                )
                self.send_response(outer.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Hangup:
    """A loopback port that accepts each connection and closes it at once (counts them);
    ``reset``: with a TCP reset (SO_LINGER 0) rather than a plain close."""

    def __init__(self, reset: bool = False) -> None:
        self.reset = reset

    def __enter__(self) -> _Hangup:
        import contextlib
        import socket
        import struct
        import threading

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.connections = 0
        self.done = threading.Event()

        def serve() -> None:
            while not self.done.is_set():
                try:
                    conn, _ = self.sock.accept()
                except OSError:
                    return
                self.connections += 1
                if self.reset:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    conn.close()
                    continue
                # A plain close is a FIN only once what the client sent has been read: a socket
                # closed with unread bytes is reset by the kernel, which made this case a reset
                # whenever the request arrived before the close (seen under load in CI).
                conn.settimeout(60)
                with contextlib.suppress(OSError):
                    conn.recv(65536)
                    conn.shutdown(socket.SHUT_WR)
                    while conn.recv(65536):
                        pass
                conn.close()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.sock.close()


def _no_agreement(out: str) -> None:
    assert "agrees with the recording" not in out and "with itself" not in out
    assert (
        out.splitlines()[0].startswith("verdict: ")
        and "no answers to compare" in out.splitlines()[0]
    )


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_refused_credential_stops_at_the_first_request(
    tmp_path: Path, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """401 on every request: one request is sent, not turns × K; exit 1; no agreement figures,
    in the text or the JSON."""
    run = _priced_run(tmp_path)
    with _Refusing(status) as up:
        assert main(["compare", str(run), "--upstream", f"openai={up.url}", "--samples", "3"]) == 1
        captured = capsys.readouterr()
        assert up.requests == 1
        _no_agreement(captured.out)
        assert (
            f"HTTP {status} from {up.url}/v1/chat/completions" in captured.err
            and "nothing more sent" in captured.err
        )
        assert (
            main(
                ["compare", str(run), "--upstream", f"openai={up.url}", "--samples", "3", "--json"]
            )
            == 1
        )
        assert up.requests == 2
    doc = orjson.loads(capsys.readouterr().out)
    assert (
        doc["turns"] == []
        and doc["verdict"]["agreement"] is None
        and doc["verdict"]["answers"] == 0
    )
    assert doc["stopped"].startswith("at seq 0, sample 1 of 3: HTTP")


@pytest.mark.parametrize("reset", [False, True], ids=["close", "reset"])
def test_an_unreachable_upstream_stops_at_the_first_request(
    tmp_path: Path, reset: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port that hangs up (one connection counted; closed or reset) and a port where nothing
    listens."""
    import socket

    run = _priced_run(tmp_path)
    with _Hangup(reset) as up:
        assert main(["compare", str(run), "--upstream", f"openai={up.url}", "--samples", "3"]) == 1
        captured = capsys.readouterr()
        assert up.connections == 1
    _no_agreement(captured.out)
    assert "the upstream 127.0.0.1:" in captured.err and "failed: " in captured.err
    # in plain words, not the HTTP library's ("can't handle event type ConnectionClosed …")
    if not reset:
        assert (
            "the upstream closed the connection before answering" in captured.err
            and "ConnectionClosed" not in captured.err
        ), captured.err
    with socket.create_server(("127.0.0.1", 0)) as s:
        closed = s.getsockname()[1]  # nothing listens there once closed
    assert (
        main(
            [
                "compare",
                str(run),
                "--upstream",
                f"openai=http://127.0.0.1:{closed}",
                "--samples",
                "3",
                "--json",
            ]
        )
        == 1
    )
    captured = capsys.readouterr()
    doc = orjson.loads(captured.out)
    assert (
        doc["turns"] == [] and doc["verdict"]["answers"] == 0 and "cannot connect" in doc["stopped"]
    )


def test_recorded_error_turns_are_skipped_listed_and_priced(
    tmp_path: Path, weather: ScriptedUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 429 then its retry, a 500: the two error turns are not sent (listed), the budget is kept
    on the three answered turns' known price; --include-errors sends them too, priced on usage
    looptap estimates (a failed call reports none)."""
    run = write(
        tmp_path / "run.jsonl",
        [
            _priced_turn(0),
            _priced_turn(1, 429, b'{"error":{"message":"Rate limit reached","type":"requests"}}'),
            _priced_turn(1),
            _priced_turn(
                2, 500, b'{"error":{"message":"The server had an error","type":"server_error"}}'
            ),
            _priced_turn(3),
        ],
    )
    with weather as fake:
        assert (
            main(
                [
                    "compare",
                    str(run),
                    "--upstream",
                    f"openai={fake.url}",
                    "--samples",
                    "2",
                    "--max-cost",
                    "1",
                ]
            )
            == 0
        )
        captured = capsys.readouterr()
        assert len(fake.log) == 6  # 3 answered turns × 2
        assert "skipped: seq 1 (recorded 429), seq 3 (recorded 500)" in captured.err
        assert (
            "6 requests (3 turns × 2 samples); estimated cost "
            f"{money(_list_price(CHEAP) * 6, True)}" in captured.err
        )
        assert "skipped: seq 1 (recorded 429), seq 3 (recorded 500)" in captured.out
        assert (
            "agrees with the recording 0%" not in captured.out
            and captured.out.count("agrees with the recording 100%") == 3
        )
        assert (
            main(
                [
                    "compare",
                    str(run),
                    "--upstream",
                    f"openai={fake.url}",
                    "--samples",
                    "2",
                    "--max-cost",
                    "1",
                    "--include-errors",
                    "--json",
                ]
            )
            == 0
        )
        captured = capsys.readouterr()
        assert len(fake.log) == 6 + 10
    assert (
        "10 requests (5 turns × 2 samples)" in captured.err
        and "(2 turns on usage looptap estimated: the call reported none)" in captured.err
    )
    doc = orjson.loads(captured.out)
    # a recorded error has no answer to agree with
    assert [t["agreement"] for t in doc["turns"]] == [1.0, None, 1.0, None, 1.0]
    assert doc["skipped"] == [] and doc["verdict"]["answers"] == 6


def test_dry_run_shows_the_real_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _priced_run(tmp_path, 2)
    assert (
        main(
            [
                "compare",
                str(run),
                "--model",
                DEAR,
                "--upstream",
                "openai=http://127.0.0.1:9/gw",
                "--dry-run",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "POST http://127.0.0.1:9/gw/v1/chat/completions with "
        "model gpt-4.1 (model gpt-4.1-mini → gpt-4.1)" in out
    )
    assert "api.openai.com" not in out


def test_text_answers_agree_by_a_stated_similarity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two texts agree when their word-level difflib ratio reaches the threshold the header states:
    a paraphrase close to the recording agrees, an unrelated answer does not (both are text)."""
    from difflib import SequenceMatcher

    def text_similarity(a: str, b: str) -> float:  # the measure docs/fork.md states, computed here
        return SequenceMatcher(None, a.split(), b.split(), autojunk=False).ratio()

    TEXT_THRESHOLD = 0.7
    recorded = "It is sunny in Paris today, 21 degrees with a light wind from the west."
    close = "It is sunny in Paris today, 22 degrees with a light wind from the west."
    other = "I cannot look up the weather right now; please try again later."
    assert text_similarity(recorded, close) >= TEXT_THRESHOLD > text_similarity(recorded, other)
    run = write(tmp_path / "run.jsonl", [_priced_turn(0, text=recorded)])
    answers = iter([close, other, close, close])
    with ScriptedUpstream(lambda req: Reply.say(next(answers))) as fake:
        assert (
            main(
                [
                    "compare",
                    str(run),
                    "--upstream",
                    f"openai={fake.url}",
                    "--samples",
                    "4",
                    "--json",
                ]
            )
            == 0
        )
        doc = orjson.loads(capsys.readouterr().out)
        (turn,) = doc["turns"]
        assert turn["agreement"] == 0.75 and turn["self_agreement"] == 0.75
        assert [s["agrees"] for s in turn["samples"]] == [True, False, True, True]
        assert turn["samples"][1]["similarity"] == round(text_similarity(recorded, other), 4)
        assert doc["text_agreement"] == {
            "measure": "word-level difflib ratio (difflib.SequenceMatcher over the "
            "whitespace-split words, the first 2,000 of each)",
            "threshold": TEXT_THRESHOLD,
        }
        answers = iter([close, other, close, close])
        assert (
            main(["compare", str(run), "--upstream", f"openai={fake.url}", "--samples", "4"]) == 0
        )
    out = capsys.readouterr().out
    assert (
        "text answers agree at a word-level difflib ratio" in out
        and f"of at least {TEXT_THRESHOLD:.2f}" in out
    )
    assert "  E text similarity to the recording " in out and "(3/4 at 0.70 or more)" in out
    from looptap.cassettes.replay.forking.compare import answer

    assert answer.TEXT_THRESHOLD == TEXT_THRESHOLD and answer.text_similarity(
        recorded, other
    ) == text_similarity(recorded, other)


def test_a_verdict_heads_the_report_and_the_mcp_tool_shows_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Overall agreement, cost ratio candidate/recorded, latency ratio, E and A differences: the
    first line of the text report, ``verdict`` in the JSON, and what ``comparison`` answers."""
    from looptap.cassettes.mcp.query import Runs, comparison

    run = _priced_run(tmp_path)
    # turn 1: the wrong city in both samples
    answers = iter(["c0", "c0", "c9", "c9", "c2", "c2", "c3", "c3"])

    def route(req: ScriptedRequest) -> Reply:
        return Reply.tool("get_weather", {"city": next(answers)})

    with ScriptedUpstream(route) as fake:
        assert (
            main(
                [
                    "compare",
                    str(run),
                    "--model",
                    DEAR,
                    "--upstream",
                    f"openai={fake.url}",
                    "--samples",
                    "2",
                    "--report",
                ]
            )
            == 0
        )
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(
        f"verdict: {DEAR} agrees with the recording in 6/8 answers (75%) over 4 turns; cost ×"
    )
    assert (
        "; latency ×" in first
        and "; E differences 2 (answers that differ), 0 off the schema; "
        "A differences 0 (0 finish reasons, 0 errors)"
        in first
    )
    doc = orjson.loads((tmp_path / "run.jsonl.compare.json").read_bytes())
    v = doc["verdict"]
    assert (v["answers"], v["agree"], v["agreement"], v["e_differences"], v["a_differences"]) == (
        8,
        6,
        0.75,
        2,
        0,
    )
    # Measured: the fake's own usage at gpt-4.1's price, against the recorded usage at
    # gpt-4.1-mini's.
    measured = sum(Decimal(t["cost"]["measured"]) for t in doc["turns"])
    assert v["cost_basis"] == "measured" and v["cost_ratio"] == round(
        float(measured / (_list_price(CHEAP) * 4)), 4
    )
    lat = sum(sum(s["latency"] for s in t["samples"]) / 2 for t in doc["turns"]) / (0.5 * 4)
    assert v["latency_ratio"] == pytest.approx(lat, abs=1e-4)
    answer = comparison(Runs([tmp_path]), "run.jsonl", 0, 20, 6000)
    assert (
        answer["verdict"]["agreement"] == 0.75
        and answer["verdict"]["e_differences"] == 2
        and answer["stopped"] is False
    )
    assert answer["recorded"]["verdict"] == first and answer["recorded"]["skipped"] == []
    # A report saved before the verdict (none of the new keys) still reads: no verdict, the turns.
    old = {
        k: v
        for k, v in doc.items()
        if k not in {"verdict", "verdict_line", "text_agreement", "skipped", "stopped"}
    }
    old["turns"] = [
        {k: v for k, v in t.items() if k not in {"answers", "errors", "cost"}} for t in doc["turns"]
    ]
    (tmp_path / "old.json").write_bytes(orjson.dumps(old))
    before = comparison(Runs([tmp_path]), "old.json", 0, 20, 6000)
    assert (
        before["verdict"] is None
        and before["agreement"] == 0.75
        and before["turns"] == 4
        and before["recorded"]["verdict"] is None
    )


def test_every_request_answered_with_an_error_is_no_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A candidate that answers every request 400 (a chained Responses id it never issued, a
    parameter it does not take): exit 1, no agreement figure; the errors are A differences."""
    run = _priced_run(tmp_path, 2)
    with _Refusing(400) as up:
        assert (
            main(
                ["compare", str(run), "--upstream", f"openai={up.url}", "--samples", "2", "--json"]
            )
            == 1
        )
        assert up.requests == 4  # not a setup failure: every turn is asked
    captured = capsys.readouterr()
    doc = orjson.loads(captured.out)
    assert [t["agreement"] for t in doc["turns"]] == [None, None] and doc["verdict"][
        "agreement"
    ] is None
    assert doc["verdict"]["errors"] == doc["verdict"]["a_differences"] == 4
    assert "no answers to compare: 4 requests, every one answered with an error" in captured.err


def test_the_real_command_stops_on_a_401_with_one_line(tmp_path: Path) -> None:
    """``looptap compare`` as a process, with the user's key: exit 1 after one request, one error
    line on stderr (no traceback), the key in neither stream."""
    import sys

    from tests.support import progress
    from tests.support.recorder import clean_env

    run = _priced_run(tmp_path)
    key = "sk-test-" + "k" * 40
    with _Refusing(401) as up:
        done = progress.run(
            [
                sys.executable,
                "-m",
                "looptap.cassettes.cli",
                "compare",
                str(run),
                "--upstream",
                f"openai={up.url}",
                "--samples",
                "5",
                "--header",
                f"authorization: Bearer {key}",
            ],
            env=clean_env(),
            capture_output=True,
        )
        assert up.requests == 1
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 1 and "Traceback" not in err
    assert [line for line in err.splitlines() if "error" in line] == [
        "looptap: error: the comparison stopped at seq 0, sample 1 of 5: HTTP 401 from "
        f"{up.url}/v1/chat/completions: the credentials were refused (Incorrect API key "
        "provided.); nothing more sent"
    ]
    assert "agrees with the recording" not in out and key not in out + err


def test_an_answer_that_breaks_off_is_an_a_error_not_a_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The candidate's first answer breaks off after its status line (a stream cut short): that is
    the candidate's failure, an A-layer error sample, not a setup failure; the comparison goes
    on."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            req = orjson.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            seen.append(1)
            city = req["messages"][-1]["content"].split()[-1].rstrip("?")
            body = _answer(call=("call_x", "get_weather", f'{{"city":"c{city}"}}'))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            if len(seen) == 1:
                self.wfile.write(body[:20])
                self.close_connection = True
                return
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        run = _priced_run(tmp_path, 2)
        assert (
            main(
                [
                    "compare",
                    str(run),
                    "--upstream",
                    f"openai=http://127.0.0.1:{server.server_address[1]}",
                    "--samples",
                    "2",
                    "--json",
                ]
            )
            == 0
        )
    finally:
        server.shutdown()
        server.server_close()
    assert len(seen) == 4
    doc = orjson.loads(capsys.readouterr().out)
    assert (
        doc["stopped"] is None
        and doc["verdict"]["errors"] == 1
        and doc["verdict"]["answers"] == 3
        and doc["verdict"]["agreement"] == 1.0
    )
    assert doc["turns"][0]["samples"][0]["error"].startswith("the answer broke off: ")


@pytest.mark.parametrize(
    "candidate", ["claude-3-5-haiku-20241022", "claude-sonnet-4-20250514", "claude-opus-4-20250514"]
)
def test_haiku_sonnet_and_opus_are_each_estimated_at_their_own_price(
    tmp_path: Path, candidate: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An Anthropic run recorded on Sonnet 4 (cache reads and writes in its usage), estimated for
    three candidates behind a local upstream (a host genai-prices does not know: priced as the API
    family's provider): each estimate is that model's price on the recorded usage."""
    import genai_prices as gp

    body = {
        "model": "claude-sonnet-4-20250514",
        "max_tokens": 512,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
    }
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-20250514",
        "content": [{"type": "text", "text": "Sunny."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 2000,
            "cache_read_input_tokens": 1000,
            "cache_creation_input_tokens": 500,
            "output_tokens": 200,
        },
    }
    ex = Exchange(
        "POST",
        "https://api.anthropic.com/v1/messages",
        [("content-type", "application/json"), ("anthropic-version", "2023-06-01")],
        orjson.dumps(body),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.3, orjson.dumps(answer))],
        duration=0.3,
    )
    run = write(tmp_path / "run.jsonl", [ex, ex])
    usage = gp.Usage(
        input_tokens=3500, cache_read_tokens=1000, cache_write_tokens=500, output_tokens=200
    )
    own = gp.calc_price(usage, model_ref=candidate, provider_id="anthropic").total_price
    recorded = gp.calc_price(
        usage, model_ref="claude-sonnet-4-20250514", provider_id="anthropic"
    ).total_price
    assert (
        main(
            [
                "compare",
                str(run),
                "--model",
                candidate,
                "--upstream",
                "anthropic=http://127.0.0.1:9",
                "--samples",
                "3",
                "--dry-run",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert own * 6 >= Decimal("0.01")  # shown with 4 decimals
    assert (
        "6 requests (2 turns × 3 samples); estimated cost "
        f"{money(own * 6)} at {candidate}'s own price" in err
    )
    assert (
        f"the recording cost {money(recorded * 6)} for as many (×{float(own / recorded):.2f})"
        in err
    )
    if "opus" in candidate:
        assert own == 5 * recorded


def test_a_responses_run_chained_by_previous_response_id_is_sent_self_contained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 42: ``compare`` on a Responses run whose turns chain by ``previous_response_id`` sent
    the recorded id to the candidate, which never gave that answer: every later turn was the API's
    400 ``previous_response_not_found``, reported as "agrees 0%, with itself 100%", exit 0. Each
    chained turn goes self-contained (the recorded history as its input, no id), so every turn
    is answered and compared."""
    import urllib.request

    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ]

    def route(req: ScriptedRequest) -> Reply:
        outputs = [
            i
            for i in req.body.get("input", [])
            if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        return (
            Reply.say("Sunny in Paris.")
            if outputs
            else Reply.tool("get_weather", {"city": "Paris"})
        )

    def post(url: str, doc: dict[str, object]) -> bytes:
        r = urllib.request.Request(
            url + "/v1/responses",
            data=orjson.dumps(doc),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(r, timeout=30) as resp:
            data: bytes = resp.read()
        return data

    first = {
        "model": "gpt-4.1-mini",
        "instructions": "Use the tool.",
        "input": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": tools,
    }
    # the recording: two turns, the second chained to the first's answer
    with ScriptedUpstream(route) as origin:
        a0 = post(origin.url, first)
        answer = orjson.loads(a0)
        call = next(o for o in answer["output"] if o["type"] == "function_call")
        second = {
            "model": "gpt-4.1-mini",
            "instructions": "Use the tool.",
            "tools": tools,
            "previous_response_id": answer["id"],
            "input": [
                {
                    "type": "function_call_output",
                    "call_id": call["call_id"],
                    "output": "sunny, 21 C",
                }
            ],
        }
        a1 = post(origin.url, second)
    url = "https://api.openai.com/v1/responses"
    exchanges = [
        Exchange(
            "POST",
            url,
            [("content-type", "application/json")],
            orjson.dumps(doc),
            status=200,
            response_headers=[("content-type", "application/json")],
            response_chunks=[(0.1, body)],
            ttfb=0.1,
        )
        for doc, body in ((first, a0), (second, a1))
    ]
    run = write(tmp_path / "run.jsonl", exchanges)
    with ScriptedUpstream(route, ids="cand") as fake:
        rc = main(["compare", str(run), "--upstream", f"openai={fake.url}", "--json"])
    doc = orjson.loads(capsys.readouterr().out)
    assert rc == 0
    assert [x.status for x in fake.log] == [200, 200], [x.line() for x in fake.log]
    sent = fake.log[1].request.body
    # self-contained: the candidate never gave the recorded answer
    assert "previous_response_id" not in sent
    kinds = [i.get("type", i.get("role")) for i in sent["input"]]
    assert (
        kinds[0] == "user" and "function_call" in kinds and kinds[-1] == "function_call_output"
    ), kinds
    assert [t["agreement"] for t in doc["turns"]] == [1.0, 1.0]
    assert all(s["error"] is None for t in doc["turns"] for s in t["samples"])


def test_a_candidate_priced_by_its_name_alone_carries_the_tilde(
    tmp_path: Path, weather: ScriptedUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    """A candidate sent to a host no provider's price list is for (a gateway; here a loopback
    fake) is priced by its name alone: an estimated price, ``~`` on every figure of it, as the
    recorded cost gets for an unknown host (docs/reading.md's cost rules)."""
    run = _priced_run(tmp_path, n=2)
    with weather as fake:
        assert (
            main(
                [
                    "compare",
                    str(run),
                    "--model",
                    "deepseek-chat",
                    "--upstream",
                    f"openai={fake.url}",
                    "--json",
                ]
            )
            == 0
        )
        captured = capsys.readouterr()
    assert "estimated cost ~$" in captured.err and "by the model's name" in captured.err, (
        captured.err
    )
    doc = orjson.loads(captured.out)
    assert {t["cost"]["candidate_estimated"] for t in doc["turns"]} == {True}
    assert {t["cost"]["recorded_estimated"] for t in doc["turns"]} == {False}
    assert doc["verdict"]["cost_candidate_estimated"] is True
    with weather as fake:
        assert (
            main(
                [
                    "compare",
                    str(run),
                    "--model",
                    "deepseek-chat",
                    "--upstream",
                    f"openai={fake.url}",
                ]
            )
            == 0
        )
    out = capsys.readouterr().out
    verdict = out.splitlines()[0]
    assert re.search(
        r"cost ×[0-9.]+ the recorded \(~\$[0-9.]+ against \$[0-9.]+ for one answer", verdict
    ), verdict
