"""The ``looptap.roundtrip/1`` object is built through its model
(``cassettes.views.schema.RoundTripJson``) and is byte for byte what the hand-made dict it replaced
was; its doc table and JSON Schema are generated from the model and kept in sync here."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import orjson
import pytest
from pydantic import BaseModel
from real_corpus import load, walked

from looptap.cassettes.errors import CassetteError
from looptap.cassettes.models import Part, emitted_calls
from looptap.cassettes.parsing import RoundTrip, parse_all, parse_exchange, side_call
from looptap.cassettes.reading import open_run
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.views.schema import (
    SCHEMA,
    RoundTripJson,
    doc_table,
    roundtrip_json,
    schema_text,
    write_docs,
)
from looptap.cassettes.wire import Exchange
from tests.support import progress

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"
REGENERATE = "python -m looptap.cassettes.views.schema --doc"


# -- the builder as it was before the model (frozen copy of views/view.py at 95f0dc4) ----


def _old_iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _old_joined(parts: list[Part], kind: str) -> str | None:
    texts = [p.text for p in parts if p.kind == kind and p.text is not None]
    return "".join(texts) if texts else None


def _old_roundtrip_json(rt: RoundTrip, ex: Exchange | None = None) -> dict[str, Any]:
    resp = rt.response
    req = rt.request
    usage = resp.usage if resp else None
    err = resp.error if resp else None
    url = urlsplit(rt.url)
    complete = rt.complete
    return {
        "schema": SCHEMA,
        "seq": rt.seq,
        "started": _old_iso(ex.started) if ex is not None else None,
        "family": rt.family,
        "operation": rt.operation,
        "method": rt.method,
        "host": url.netloc,
        "path": url.path,
        "model_requested": req.model if req else None,
        "model_served": resp.model if resp else None,
        "stream": rt.stream,
        "transport": "websocket"
        if ex is not None and any(n.startswith("websocket ") for n in ex.notes)
        else "http",
        "status": rt.status,
        "finish_reason": {
            "raw": resp.finish_reason_raw if resp else None,
            "normalised": resp.finish_reason.value if resp and resp.finish_reason else None,
        },
        "usage": {
            "input": usage.input_tokens if usage else None,
            "output": usage.output_tokens if usage else None,
            "cache_read": usage.cache_read_tokens if usage else None,
            "cache_write": usage.cache_write_tokens if usage else None,
            "reasoning": usage.reasoning_tokens if usage else None,
            "total": usage.total_tokens if usage else None,
        },
        "tool_calls": [
            {
                "id": tc.id,
                "name": tc.name,
                "arguments": tc.arguments,
                "arguments_raw": tc.arguments_raw,
                "arguments_error": tc.arguments_error,
                "ran_by": "server" if tc.by_server else "client",
            }
            for tc in emitted_calls(resp)
        ],
        "text": _old_joined(resp.parts, "text") if resp else None,
        "reasoning": _old_joined(resp.parts, "reasoning") if resp else None,
        "refusal": _old_joined(resp.parts, "refusal") if resp else None,
        "error": None
        if err is None
        else {
            "status": err.status,
            "type": err.type,
            "code": err.code,
            "message": err.message,
            "in_stream": err.in_stream,
        },
        "complete": complete,
        "truncated": complete is False,
        # issue 92: how it was read (added after the freeze above)
        "read": rt.read,
        "unread": rt.unread,
        "timing": {"ttfb": rt.ttfb, "ttft": rt.ttft, "duration": rt.duration},
        "request": None
        if req is None
        else {
            "messages": len(req.messages),
            "tools": [t.name for t in req.tools],
            "tool_choice": req.tool_choice_mode,
            "previous_response_id": req.previous_response_id,
            "history": ex.history_delta if ex is not None else None,
        },
        "transport_error": rt.transport_error,
        "analysis_errors": list(rt.analysis_errors),
        "notes": list(rt.notes),
        "mcp": side_call(ex, rt) if ex is not None else None,
    }


# -- the corpus, as imported (YAML) and as recorded (looptap cassettes, read back) -----------------


def _corpus_yaml(files: str = "every") -> Iterator[list[tuple[RoundTrip, Exchange]]]:
    """Each readable cassette of tests/corpus (``files``: its cover or every file, as
    ``real_corpus.walked``) as its round trips (gRPC ``*.xai.yaml`` recordings have no HTTP
    requests: ``load_vcr`` refuses them)."""
    for path in walked(files):
        try:
            exchanges = load(path)
        except CassetteError:
            assert path.name.endswith(".xai.yaml"), path
            continue
        yield list(zip(parse_all(exchanges), exchanges, strict=True))


#: (round trips, delta-encoded ones) at least, of the cover and of every file (333 and 69, 1,500
#: and 100 past, when counted).
AT_LEAST = {"cover": (300, 50), "every": (1500, 100)}


@pytest.fixture(
    scope="module",
    params=[
        "cover",
        pytest.param(
            "every",
            marks=pytest.mark.slow(
                reason="every corpus file, not its cover (findings_cover(): every wire shape): "
                "about 8 s of CPU recording and reading 1,099 files"
            ),
        ),
    ],
)
def files(request: pytest.FixtureRequest) -> str:
    """The corpus' files the views are compared on: its cover by default, every file at night."""
    return str(request.param)


@pytest.fixture(scope="module")
def yaml_pairs(files: str) -> list[tuple[RoundTrip, Exchange]]:
    return [pair for run in _corpus_yaml(files) for pair in run]


@pytest.fixture(scope="module")
def cassette_pairs(
    files: str, tmp_path_factory: pytest.TempPathFactory
) -> list[tuple[RoundTrip, Exchange]]:
    """The corpus recorded into looptap cassettes and read back: seq, history deltas (in the
    order the codec reads them) and everything the writer's redaction changes."""
    out = tmp_path_factory.mktemp("recorded")
    pairs: list[tuple[RoundTrip, Exchange]] = []
    for i, run in enumerate(_corpus_yaml(files)):
        dest = out / f"{i}.jsonl"
        with CassetteWriter(dest, meta={"source": "vcr"}) as w:
            for _, ex in run:
                w.append(ex)
        read = open_run(dest, whole=True)
        pairs.extend((rt, ex) for ex, rt in read.pairs)
    return pairs


def _differences(pairs: list[tuple[RoundTrip, Exchange]]) -> list[str]:
    out = []
    with warnings.catch_warnings():
        # (a pydantic serialization warning would be a value of a type the model does not declare)
        warnings.simplefilter("error")
        for rt, ex in pairs:
            old, new = (
                orjson.dumps(_old_roundtrip_json(rt, ex)),
                orjson.dumps(roundtrip_json(rt, ex)),
            )
            if old != new:
                out.append(f"#{rt.seq} {rt.url}:\n  old {old!r}\n  new {new!r}")
    return out


@pytest.mark.corpus
def test_same_bytes_as_the_hand_made_dict_on_the_imported_corpus(
    files: str, yaml_pairs: list[tuple[RoundTrip, Exchange]]
) -> None:
    assert len(yaml_pairs) > AT_LEAST[files][0]
    assert _differences(yaml_pairs) == []
    print(f"{len(yaml_pairs)} imported round trips compared, 0 differences")


@pytest.mark.corpus
def test_same_bytes_as_the_hand_made_dict_on_the_recorded_corpus(
    files: str, cassette_pairs: list[tuple[RoundTrip, Exchange]]
) -> None:
    assert len(cassette_pairs) > AT_LEAST[files][0]
    delta_encoded = sum(ex.history_delta is not None for _, ex in cassette_pairs)
    assert delta_encoded > AT_LEAST[files][1]
    assert _differences(cassette_pairs) == []
    print(
        f"{len(cassette_pairs)} recorded round trips ({delta_encoded} "
        "delta-encoded) compared, 0 differences"
    )


@pytest.mark.corpus
def test_same_bytes_without_an_exchange_and_with_the_writers_history_order() -> None:
    """``roundtrip_json(rt)`` alone (no seq, no exchange), and a history delta in the order the
    writer builds it (``rewritten`` after ``appended``, unlike the codec's): kept as it comes."""
    [(rt, ex)] = next(
        run for run in _corpus_yaml() if len(run) == 1 and run[0][0].request is not None
    )
    assert orjson.dumps(roundtrip_json(rt)) == orjson.dumps(_old_roundtrip_json(rt))
    ex.history_delta = {"base": 0, "keep": 1, "appended": 2, "rewritten": True}
    new = roundtrip_json(parse_exchange(ex), ex)
    assert orjson.dumps(new) == orjson.dumps(_old_roundtrip_json(parse_exchange(ex), ex))
    assert list(new["request"]["history"]) == ["base", "keep", "appended", "rewritten"]


@pytest.mark.corpus
def test_the_object_is_what_the_model_dumps(
    yaml_pairs: list[tuple[RoundTrip, Exchange]], cassette_pairs: list[tuple[RoundTrip, Exchange]]
) -> None:
    """The object is built without pydantic's validation (``roundtrip_json`` runs once per recorded
    round trip): validating it with the model and dumping it again gives the same bytes, so its
    keys are the model's, in its order, and its values of the types the model declares."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for rt, ex in [*yaml_pairs, *cassette_pairs]:
            v = roundtrip_json(rt, ex)
            # (exclude_unset: ``tool_http``, the one field with a default, is left out unless set)
            assert orjson.dumps(
                RoundTripJson.model_validate(v).model_dump(
                    mode="json", by_alias=True, exclude_unset=True
                )
            ) == orjson.dumps(v)


# -- the JSON Schema and the doc -------------------------------------------------------------------


@pytest.mark.corpus
def test_the_json_schema_validates_every_round_trip(
    yaml_pairs: list[tuple[RoundTrip, Exchange]], cassette_pairs: list[tuple[RoundTrip, Exchange]]
) -> None:
    schema = RoundTripJson.model_json_schema(mode="serialization")
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for rt, ex in [*yaml_pairs, *cassette_pairs]:
        validator.validate(roundtrip_json(rt, ex))
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(roundtrip_json(*yaml_pairs[0]) | {"schema": "looptap.roundtrip/2"})
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(
            {k: v for k, v in roundtrip_json(*yaml_pairs[0]).items() if k != "usage"}
        )


@pytest.mark.corpus
def test_the_json_schema_validates_show_json_lines_with_their_analysis_additions() -> None:
    """The schema leaves objects open: the analysis fields of ``show --json``, ``mcp.linked`` and
    ``tool_calls[].mcp`` validate too."""
    path = (
        CORPUS
        / "pydantic-ai/tests/cassettes/test_temporal/test_mcptoolset_in_temporal_workflow.yaml"
    )
    r = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "show", "--json", str(path)],
        capture_output=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    views = [orjson.loads(line) for line in r.stdout.splitlines()]
    assert any(v["family"] == "mcp" for v in views) and any("findings" in v for v in views)
    validator = jsonschema.Draft202012Validator(
        RoundTripJson.model_json_schema(mode="serialization")
    )
    for v in views:
        validator.validate(v)


def test_every_field_is_described() -> None:
    def walk(model: type[Any]) -> Iterator[str]:
        for name, field in model.model_fields.items():
            if not field.description:
                yield f"{model.__name__}.{name}"
            for arg in [field.annotation, *getattr(field.annotation, "__args__", ())]:
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    yield from walk(arg)

    assert list(walk(RoundTripJson)) == []


def test_the_doc_table_and_the_schema_file_are_generated_from_the_model() -> None:
    doc = (ROOT / "docs" / "show-json.md").read_text()
    assert doc_table() in doc, (
        "docs/show-json.md: the looptap.roundtrip/1 field table "
        f"is out of date; regenerate it with `{REGENERATE}`"
    )
    assert (ROOT / "docs" / "roundtrip.schema.json").read_text() == schema_text(), (
        f"docs/roundtrip.schema.json is out of date; regenerate it with `{REGENERATE}`"
    )


@pytest.mark.corpus
def test_the_doc_table_lists_every_field_in_output_order(
    yaml_pairs: list[tuple[RoundTrip, Exchange]],
) -> None:
    rows = [line.split("|")[1].strip() for line in doc_table().splitlines()[2:]]
    names = [n.strip(" `") for row in rows for n in row.split(",")]
    top = [n for n in names if "." not in n]
    # (``tool_http`` only on a tool's HTTP call: the corpus has none)
    assert [n.removesuffix("[]") for n in top if n != "tool_http"] == list(
        roundtrip_json(*yaml_pairs[0])
    )


def test_write_docs_rewrites_a_stale_table(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    stale = (
        (ROOT / "docs" / "show-json.md").read_text().replace("position in the run", "where it is")
    )
    (tmp_path / "docs" / "show-json.md").write_text(stale)
    write_docs(tmp_path)
    assert (tmp_path / "docs" / "show-json.md").read_text() == (
        ROOT / "docs" / "show-json.md"
    ).read_text()
    assert (tmp_path / "docs" / "roundtrip.schema.json").read_text() == schema_text()
