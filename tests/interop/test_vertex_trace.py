"""OTel contrib vertexai 2.2b0's trace (tests/interop/traces/vertexai.otlp.json: the Vertex AI
SDK's Gemini calls over REST, google-cloud-aiplatform 2.7.0) imported as Gemini calls to Vertex
AI: the instrumentation names no provider, spells the model's role ``model`` and keeps no project;
a request the agent sends matches under any project, location and query, and on nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.cli import main
from looptap.cassettes.matching import Matcher
from looptap.cassettes.reading import open_run
from tests.interop.test_import_traces import show_json
from tests.interop.test_instrumented_traces import TRACES, imported


def _recorded() -> list[Any]:
    return list(open_run(TRACES / "vertexai.run.jsonl", whole=True).exchanges)


def test_a_vertex_trace_is_rebuilt_as_gemini_on_vertex(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read as Gemini (its scope says Vertex AI: the span names no provider), the history's
    ``model`` messages the model's own (not a user's, which made a false
    ``C.assistant_not_echoed`` of every turn after the first), at a Vertex URL whose project and
    location the import says it made up."""
    run = imported("vertexai", tmp_path)
    views = show_json(run, capsys)
    assert [v["family"] for v in views] == ["gemini"] * 3
    assert not [f["code"] for v in views for f in v["findings"] if f["severity"] != "info"]
    for v in views:
        assert v["path"].startswith("/v1/projects/unknown/locations/unknown/publishers/google/")
        assert {"project", "location", "query"} <= set(v["reconstructed"]["inferred"])
        assert any("trace names no project nor location" in n for n in v["notes"]), v["notes"]
    last = orjson.loads(list(open_run(run, whole=True).exchanges)[-1].request_body)
    roles = [m["role"] for m in last["contents"]]
    assert roles == ["user", "model", "user", "model", "user"], roles


def _with_server(host: str, tmp_path: Path) -> Path:
    doc = orjson.loads((TRACES / "vertexai.otlp.json").read_bytes())
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                for a in s["attributes"]:
                    if a["key"] == "server.address":
                        a["value"] = {"stringValue": host}
    src, out = tmp_path / "trace.json", tmp_path / "run.jsonl"
    src.write_bytes(orjson.dumps(doc) + b"\n")
    assert main(["import", "-q", str(src), "-o", str(out)]) == 0
    return out


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("europe-west4-aiplatform.googleapis.com", "https://europe-west4-aiplatform.googleapis.com"
         "/v1/projects/unknown/locations/europe-west4/"),
        # 2.2b0 parses an api_endpoint with a scheme as the host "http": no region
        ("http", "https://aiplatform.googleapis.com/v1/projects/unknown/locations/unknown/"),
        ("aiplatform.googleapis.com", "https://aiplatform.googleapis.com/v1/projects/unknown/"
         "locations/unknown/"),
    ],
)  # fmt: skip
def test_the_region_is_the_servers_when_it_names_one(host: str, url: str, tmp_path: Path) -> None:
    run = open_run(_with_server(host, tmp_path), whole=True)
    for ex in run.exchanges:
        assert ex.url.startswith(url), ex.url
        named = "location" not in (ex.reconstructed or {})["inferred"]
        assert named is (host.startswith("europe-west4")), ex.reconstructed


def _ask(matcher: Matcher, ex: Any, url: str | None = None, body: Any = None) -> bool:
    raw = orjson.dumps(body) if body is not None else ex.request_body
    found = matcher.match(ex.method, url or ex.url, ex.request_headers, raw)
    return not hasattr(found, "reason")


def test_a_request_matches_under_any_project_location_and_query_and_on_nothing_else(
    tmp_path: Path,
) -> None:
    """The project, location and transport query the trace does not keep are no reason for a miss
    (each is on the record as tolerated); the model, the method and the messages are."""
    run = imported("vertexai", tmp_path)
    first = _recorded()[0]
    path = "/v1/projects/looptap-test/locations/us-central1/publishers/google/models/"
    assert path in first.url and "?%24alt=json" in first.url
    body = orjson.loads(first.request_body)
    rome = {**body, "contents": [{"role": "user", "parts": [{"text": "Rome?"}]}]}
    cases = [
        (first.url, None, True),  # as the SDK sent it: its project, region, $alt query
        (first.url.replace("looptap-test", "another-project"), None, True),
        (first.url.replace("us-central1", "europe-west4").split("?")[0], None, True),
        (first.url.replace("/v1/", "/v1beta1/"), None, True),  # vertexai.preview's
        (first.url.replace("gemini-2.5-flash", "gemini-2.5-pro"), None, False),
        (first.url.replace(":generateContent", ":streamGenerateContent"), None, False),
        (first.url, rome, False),
    ]
    for url, changed, answered in cases:
        matcher = Matcher(open_run(run, whole=True).exchanges)
        assert _ask(matcher, first, url, changed) is answered, url
        if answered and "?" in url:
            tolerated = [t for ts in matcher.tolerated.values() for t in ts]
            assert any(t.path == ("query",) and t.detector == "inferred" for t in tolerated)


def test_a_streamed_vertex_call_matches_whatever_query_its_transport_adds(tmp_path: Path) -> None:
    """A call the trace says streamed is rebuilt as ``streamGenerateContent?alt=sse`` (served as
    SSE); a stream request with google-genai's ``alt=sse`` or the Vertex AI SDK's REST query is
    answered by it all the same."""
    doc = orjson.loads((TRACES / "vertexai.otlp.json").read_bytes())
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                s["attributes"].append(
                    {"key": "gen_ai.request.stream", "value": {"boolValue": True}}
                )
    src, out = tmp_path / "trace.json", tmp_path / "run.jsonl"
    src.write_bytes(orjson.dumps(doc) + b"\n")
    assert main(["import", "-q", str(src), "-o", str(out)]) == 0
    rebuilt = next(iter(open_run(out, whole=True).exchanges))
    assert rebuilt.url.endswith(":streamGenerateContent?alt=sse"), rebuilt.url
    first = _recorded()[0]
    streamed = first.url.replace(":generateContent", ":streamGenerateContent")
    for url in (streamed, streamed.split("?")[0] + "?alt=sse"):
        assert _ask(Matcher(open_run(out, whole=True).exchanges), first, url), url


def test_a_query_is_compared_where_the_import_did_not_infer_it(tmp_path: Path) -> None:
    """Only a round trip marked ``query`` inferred leaves the query out: the google-genai trace's
    rebuilt Gemini calls (a generativelanguage URL, no such mark) still compare it."""
    run = imported("google-genai", tmp_path)
    ex = next(e for e in open_run(run, whole=True).exchanges if ":generateContent" in e.url)
    assert "query" not in (ex.reconstructed or {})["inferred"]
    assert _ask(Matcher(open_run(run, whole=True).exchanges), ex, ex.url + "?x=1") is False
