"""The Bedrock Agents runtime (``InvokeAgent``, ``InvokeInlineAgent``, ``RetrieveAndGenerate``,
``RetrieveAndGenerateStream``) read as LLM calls (issue 45, "LLM calls left unread": it was "not an
LLM call").

The recordings are made here: boto3 (in ``.venv-clients``, run as a subprocess) calls a loopback
fake that answers in the shapes of botocore's ``bedrock-agent-runtime`` service model (AWS event
streams built with ``test_bedrock._frame``); what boto3 itself read is compared with looptap's
reading of the exchange the fake saw and sent."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.models import FinishReason
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.wire import Exchange
from tests.cassettes.providers.test_bedrock import _frame

REPO = Path(__file__).resolve().parents[3]
CLIENTS_PYTHON = Path(
    os.environ.get("LOOPTAP_CLIENTS_PYTHON") or REPO / ".venv-clients" / "bin" / "python"
)
UPSTREAM = "https://bedrock-agent-runtime.us-east-1.amazonaws.com"
MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
STREAM = "application/vnd.amazon.eventstream"

#: Run in the clients' interpreter: each call of argv[2] against the fake at argv[1]; what boto3
#: read, one JSON line each.
_CLIENT = r"""
import json, sys, boto3
from botocore.config import Config
c = boto3.client("bedrock-agent-runtime", endpoint_url=sys.argv[1], region_name="us-east-1", aws_access_key_id="AKIDTEST",
                 aws_secret_access_key="secret", config=Config(retries={"max_attempts": 1}))
for op, kwargs in json.loads(sys.argv[2]):
    got = {"op": op}
    try:
        r = getattr(c, op)(**kwargs)
        if op in ("invoke_agent", "invoke_inline_agent"):
            text, traces, rc = "", [], []
            for ev in r["completion"]:
                if "chunk" in ev: text += ev["chunk"]["bytes"].decode()
                if "trace" in ev: traces.append(ev["trace"]["trace"])
                if "returnControl" in ev: rc.append(ev["returnControl"])
            got.update(text=text, traces=len(traces), returnControl=rc, session=r["sessionId"])
        elif op == "retrieve_and_generate_stream":
            got.update(text="".join(ev["output"]["text"] for ev in r["stream"] if "output" in ev), session=r["sessionId"])
        else:
            got.update(text=r["output"]["text"], guardrail=r.get("guardrailAction"), session=r["sessionId"])
    except Exception as e:
        got.update(error=type(e).__name__, message=str(e))
    print(json.dumps(got, default=str), flush=True)
"""  # noqa: E501


class _Fake(BaseHTTPRequestHandler):
    script: ClassVar[list[tuple[int, list[tuple[str, str]], bytes]]] = []
    seen: ClassVar[list[Exchange]] = []
    #: The service the fake stands for (the URL its exchanges are recorded under).
    upstream: ClassVar[str] = UPSTREAM

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        status, headers, out = self.script.pop(0)
        req = [
            (k.lower(), v)
            for k, v in self.headers.items()
            if k.lower() not in ("authorization", "host")
        ]
        # kept before answering: the client may go on as soon as it has read the answer
        self.seen.append(
            Exchange(
                "POST",
                self.upstream + self.path,
                req,
                body,
                status=status,
                response_headers=[(k.lower(), v) for k, v in headers],
                response_chunks=[(0.05, out)],
                seq=len(self.seen),
            )
        )
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


def serve_fake(upstream: str = UPSTREAM) -> Iterator[tuple[str, type[_Fake]]]:
    """A loopback fake standing for the AWS service at ``upstream`` (skipped without boto3)."""
    if not CLIENTS_PYTHON.exists():
        pytest.skip("no .venv-clients (boto3)")
    handler = type("Fake", (_Fake,), {"script": [], "seen": [], "upstream": upstream})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def fake() -> Iterator[tuple[str, type[_Fake]]]:
    yield from serve_fake()


def run_boto(
    client: str, url: str, *calls: tuple[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """What boto3 read: each call of ``calls`` made by the ``client`` script against ``url``, one
    JSON line each."""
    out = subprocess.run(
        [str(CLIENTS_PYTHON), "-c", client, url, json.dumps(calls)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def _boto(url: str, *calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return run_boto(_CLIENT, url, *calls)


def _rt(ex: Exchange) -> RoundTrip:
    rt = parse_exchange(ex)
    assert rt.analysis_errors == [], rt.analysis_errors
    return rt


def _chunk(text: str) -> bytes:
    return _frame("chunk", {"bytes": base64.b64encode(text.encode()).decode()})


def _trace(step: dict[str, Any], session: str = "s-1") -> bytes:
    return _frame(
        "trace",
        {
            "agentId": "AGENT1",
            "agentAliasId": "ALIAS1",
            "sessionId": session,
            "agentVersion": "1",
            "eventTime": "2026-11-25T06:00:00Z",
            "trace": step,
        },
    )


def _model_step(
    trace_id: str, usage: tuple[int, int], rationale: str | None = None
) -> dict[str, Any]:
    step: dict[str, Any] = {
        "modelInvocationInput": {
            "traceId": trace_id,
            "type": "ORCHESTRATION",
            "foundationModel": MODEL,
            "text": "{...prompt...}",
            "inferenceConfiguration": {"maximumLength": 2048, "temperature": 0.0},
        },
    }
    out = {
        "orchestrationTrace": {
            "modelInvocationOutput": {
                "traceId": trace_id,
                "rawResponse": {"content": "..."},
                "metadata": {"usage": {"inputTokens": usage[0], "outputTokens": usage[1]}},
            }
        }
    }
    return {"orchestrationTrace": step} if rationale is None else out


def _agent(*frames: bytes, session: str = "s-1") -> tuple[int, list[tuple[str, str]], bytes]:
    return (
        200,
        [
            ("content-type", STREAM),
            ("x-amz-bedrock-agent-session-id", session),
            ("x-amzn-bedrock-agent-content-type", "application/json"),
        ],
        b"".join(frames),
    )


RC = {"invocationId": "inv-1", "invocationInputs": [{"functionInvocationInput": {
    "actionGroup": "weather", "function": "get_weather", "actionInvocationType": "RESULT",
    "parameters": [{"name": "city", "type": "string", "value": "Paris"}]}}]}
FINAL = {
    "orchestrationTrace": {
        "observation": {
            "traceId": "t-3",
            "type": "FINISH",
            "finalResponse": {"text": "Sunny, 21C in Paris."},
        }
    }
}
INVOKE = {"agentId": "AGENT1", "agentAliasId": "ALIAS1", "sessionId": "s-1", "enableTrace": True}


def _agent_loop(url: str, handler: type[_Fake]) -> list[dict[str, Any]]:
    handler.script += [
        _agent(
            _trace(_model_step("t-1", (0, 0))),
            _trace(_model_step("t-1", (310, 42), "x")),
            _frame("returnControl", RC),
        ),
        _agent(
            _trace(_model_step("t-2", (0, 0))),
            _trace(_model_step("t-2", (380, 20), "x")),
            _trace(FINAL),
            _chunk("Sunny, 21C "),
            _chunk("in Paris."),
        ),
        _agent(
            _trace(_model_step("t-4", (0, 0))),
            _trace(_model_step("t-4", (420, 8), "x")),
            _trace(
                {
                    "orchestrationTrace": {
                        "observation": {
                            "type": "FINISH",
                            "finalResponse": {"text": "Rome: cloudy."},
                        }
                    }
                }
            ),
            _chunk("Rome: cloudy."),
        ),
    ]
    result = {
        "invocationId": "inv-1",
        "returnControlInvocationResults": [
            {
                "functionResult": {
                    "actionGroup": "weather",
                    "function": "get_weather",
                    "responseBody": {"TEXT": {"body": "sunny, 21C"}},
                }
            }
        ],
    }
    return _boto(url, ("invoke_agent", {**INVOKE, "inputText": "Weather in Paris?"}),
                 ("invoke_agent", {**INVOKE, "sessionState": result}),
                 ("invoke_agent", {**INVOKE, "inputText": "And in Rome?"}))


def test_invoke_agent_with_return_control_is_read_and_stays_clean(
    fake: tuple[str, type[_Fake]],
) -> None:
    url, handler = fake
    got = _agent_loop(url, handler)
    assert [g.get("error") for g in got] == [None] * 3, got
    r1, r2, r3 = (_rt(ex) for ex in handler.seen)
    assert [(r.family, r.operation, r.stream) for r in (r1, r2, r3)] == [
        ("bedrock_agents", "generate", True)
    ] * 3
    assert r1.request is not None and r1.request.messages[0].parts[0].text == "Weather in Paris?"
    assert (
        r1.response is not None
        and r1.response.model == MODEL
        and r1.response.finish_reason is FinishReason.TOOL_CALL
    )
    (call,) = [p.tool_call for p in r1.response.parts if p.tool_call is not None]
    assert (call.id, call.name, call.arguments) == ("inv-1", "get_weather", {"city": "Paris"})
    assert (
        got[0]["returnControl"][0]["invocationInputs"][0]["functionInvocationInput"]["function"]
        == call.name
    )
    u = r1.response.usage
    assert u is not None and (u.input_tokens, u.output_tokens) == (310, 42)
    assert (
        r2.request is not None
        and r2.request.messages[0].role == "tool"
        and r2.request.messages[0].parts[0].tool_result is not None
    )
    assert r2.request.messages[0].parts[0].tool_result.call_id == "inv-1"
    assert r2.response is not None and r2.response.text == got[1]["text"] == "Sunny, 21C in Paris."
    assert (
        r2.response.finish_reason is FinishReason.COMPLETE
        and r2.response.complete is True
        and r2.response.id == got[1]["session"]
    )
    assert r3.response is not None and r3.response.text == got[2]["text"]
    run = analyse(handler.seen)
    assert [len(c.turns) for c in run.conversations] == [3]
    # priced as the foundation model's tokens
    assert all(run.turns[seq].tokens.cost is not None for seq in run.conversations[0].turns)
    assert not [f for f in run.findings if f.severity.value in ("warning", "error")], [
        (f.code, f.message) for f in run.findings
    ]


def test_invoke_agent_cut_untraced_and_exceptions(fake: tuple[str, type[_Fake]]) -> None:
    url, handler = fake
    whole = [
        _trace(_model_step("t-1", (0, 0))),
        _trace(_model_step("t-1", (50, 5), "x")),
        _trace(FINAL),
        _chunk("Sunny."),
    ]
    handler.script += [
        _agent(*whole[:2]),  # traces on, the final response never came
        _agent(_chunk("Sunny.")),  # enableTrace off: nothing says it ended
        _agent(
            _chunk("Sun"), _frame("throttlingException", {"message": "Rate exceeded"}, "exception")
        ),
        (
            400,
            [("content-type", "application/json"), ("x-amzn-errortype", "ValidationException")],
            b'{"message": "agentAliasId is invalid"}',
        ),
    ]
    got = _boto(url, *[("invoke_agent", {**INVOKE, "inputText": "Weather?"})] * 4)
    assert got[2]["error"] == "EventStreamError" and "Rate exceeded" in got[2]["message"]
    assert got[3]["error"] == "ValidationException"
    cut, untraced, throttled, invalid = (_rt(ex) for ex in handler.seen)
    assert (
        cut.response is not None
        and cut.response.complete is False
        and cut.response.finish_reason is None
    )
    assert (
        untraced.response is not None
        and untraced.response.text == "Sunny."
        and untraced.response.complete is None
    )
    assert (
        throttled.response is not None
        and throttled.response.error is not None
        and throttled.response.error.in_stream
    )
    assert (throttled.response.error.type, throttled.response.error.message) == (
        "throttlingException",
        "Rate exceeded",
    )
    assert (
        throttled.response.finish_reason is FinishReason.ERROR and throttled.response.text == "Sun"
    )
    assert (
        invalid.family == "bedrock_agents"
        and invalid.response is not None
        and invalid.response.error is not None
    )
    assert (invalid.response.error.status, invalid.response.error.message) == (
        400,
        "agentAliasId is invalid",
    )


INLINE = {
    "sessionId": "inline-s-1",
    "foundationModel": MODEL,
    "instruction": "You are a weather assistant. Use get_weather for every city.",
    "enableTrace": True,
    "actionGroups": [
        {
            "actionGroupName": "weather",
            "actionGroupExecutor": {"customControl": "RETURN_CONTROL"},
            "functionSchema": {
                "functions": [
                    {
                        "name": "get_weather",
                        "description": "The weather in a city",
                        "parameters": {"city": {"type": "string", "required": True}},
                    }
                ]
            },
        },
        {"actionGroupName": "ask", "parentActionGroupSignature": "AMAZON.UserInput"},
    ],
}


def test_invoke_inline_agent_is_read_with_its_model_instruction_and_tools(
    fake: tuple[str, type[_Fake]],
) -> None:
    """``InvokeInlineAgent`` (``POST /agents/{sessionId}``) defines the agent in the request: its
    model, instruction and action groups are the call's model, system prompt and tools; the
    return-control loop pairs as InvokeAgent's does (it was "not an LLM call")."""
    url, handler = fake
    rc = {**RC, "invocationId": "inv-9"}
    handler.script += [
        _agent(
            _trace(_model_step("t-1", (0, 0))),
            _trace(_model_step("t-1", (290, 30), "x")),
            _frame("returnControl", rc),
            session="inline-s-1",
        ),
        _agent(
            _trace(_model_step("t-2", (0, 0))),
            _trace(_model_step("t-2", (350, 12), "x")),
            _trace(FINAL),
            _chunk("Sunny, 21C in Paris."),
            session="inline-s-1",
        ),
    ]
    result = {
        "invocationId": "inv-9",
        "returnControlInvocationResults": [
            {
                "functionResult": {
                    "actionGroup": "weather",
                    "function": "get_weather",
                    "responseBody": {"TEXT": {"body": "sunny, 21C"}},
                }
            }
        ],
    }
    got = _boto(url, ("invoke_inline_agent", {**INLINE, "inputText": "Weather in Paris?"}),
                ("invoke_inline_agent", {**INLINE, "inlineSessionState": result}))
    assert [g.get("error") for g in got] == [None, None], got
    r1, r2 = (_rt(ex) for ex in handler.seen)
    assert [(r.family, r.operation, r.stream) for r in (r1, r2)] == [
        ("bedrock_agents", "generate", True)
    ] * 2
    assert r1.request is not None and r1.request.model == MODEL
    assert [p.text for p in r1.request.system] == [INLINE["instruction"]]
    assert [(t.name, t.kind) for t in r1.request.tools] == [
        ("get_weather", "function"),
        ("AMAZON.UserInput", "AMAZON.UserInput"),
    ]
    assert r1.request.tools[0].parameters == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    assert r1.response is not None and r1.response.finish_reason is FinishReason.TOOL_CALL
    (call,) = [p.tool_call for p in r1.response.parts if p.tool_call is not None]
    assert (call.id, call.name, call.arguments) == ("inv-9", "get_weather", {"city": "Paris"})
    assert r2.request is not None and r2.request.messages[0].parts[0].tool_result is not None
    assert r2.request.messages[0].parts[0].tool_result.call_id == "inv-9"
    assert (
        r2.response is not None
        and r2.response.text == got[1]["text"] == "Sunny, 21C in Paris."
        and r2.response.complete is True
    )
    run = analyse(handler.seen)
    assert [len(c.turns) for c in run.conversations] == [2]
    assert not [f for f in run.findings if f.severity.value in ("warning", "error")], [
        (f.code, f.message) for f in run.findings
    ]


RAG_CONF = {
    "type": "KNOWLEDGE_BASE",
    "knowledgeBaseConfiguration": {
        "knowledgeBaseId": "KB12345678",
        "modelArn": f"arn:aws:bedrock:us-east-1::foundation-model/{MODEL}",
    },
}


def test_retrieve_and_generate_json_and_stream(fake: tuple[str, type[_Fake]]) -> None:
    url, handler = fake
    answer = {
        "sessionId": "kb-s-1",
        "output": {"text": "Returns within 30 days."},
        "citations": [
            {
                "generatedResponsePart": {
                    "textResponsePart": {
                        "text": "Returns within 30 days.",
                        "span": {"start": 0, "end": 22},
                    }
                },
                "retrievedReferences": [
                    {
                        "content": {"text": "Our return policy..."},
                        "location": {"type": "S3", "s3Location": {"uri": "s3://kb/policy.pdf"}},
                    }
                ],
            }
        ],
    }
    blocked = {
        "sessionId": "kb-s-2",
        "output": {"text": "Sorry, I can't answer that."},
        "guardrailAction": "INTERVENED",
    }
    events = [_frame("output", {"text": "Returns within "}), _frame("output", {"text": "30 days."}),
              _frame("citation", {"citation": answer["citations"][0]})]
    sess = [("content-type", STREAM), ("x-amzn-bedrock-knowledge-base-session-id", "kb-s-3")]
    handler.script += [(200, [("content-type", "application/json")], orjson.dumps(answer)),
                       (200, [("content-type", "application/json")], orjson.dumps(blocked)),
                       (200, sess, b"".join(events)),
                       (200, sess, b"".join(events)[:-7])]
    q = {
        "input": {"text": "What is the return policy?"},
        "retrieveAndGenerateConfiguration": RAG_CONF,
    }
    got = _boto(
        url,
        ("retrieve_and_generate", q),
        ("retrieve_and_generate", q),
        ("retrieve_and_generate_stream", q),
        ("retrieve_and_generate_stream", q),
    )
    plain, guarded, streamed, cut = (_rt(ex) for ex in handler.seen)
    assert (plain.family, plain.operation, plain.stream) == ("bedrock_agents", "generate", False)
    assert (
        plain.request is not None
        and plain.request.model == MODEL
        and plain.request.messages[0].parts[0].text == "What is the return policy?"
    )
    assert (
        plain.response is not None
        and plain.response.text == got[0]["text"]
        and plain.response.finish_reason is FinishReason.COMPLETE
    )
    assert plain.response.id == "kb-s-1" and plain.response.complete is True
    assert (
        guarded.response is not None
        and guarded.response.finish_reason is FinishReason.FILTERED
        and got[1]["guardrail"] == "INTERVENED"
    )
    assert (
        streamed.stream
        and streamed.response is not None
        and streamed.response.text == got[2]["text"] == "Returns within 30 days."
    )
    assert streamed.response.id == "kb-s-3"
    assert cut.response is not None and cut.response.complete is False


def test_other_agent_runtime_paths_are_not_taken() -> None:
    retrieve = Exchange(
        "POST",
        UPSTREAM + "/knowledgebases/KB1/retrieve",
        [("content-type", "application/json")],
        b'{"retrievalQuery": {"text": "x"}}',
    )
    assert parse_exchange(retrieve).family != "bedrock_agents"
    local = Exchange(
        "POST",
        "http://127.0.0.1:9/retrieveAndGenerate",
        [("content-type", "application/json")],
        orjson.dumps({"input": {"text": "x"}, "retrieveAndGenerateConfiguration": RAG_CONF}),
    )
    assert parse_exchange(local).family == "bedrock_agents"
