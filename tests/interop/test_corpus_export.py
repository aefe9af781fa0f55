"""Every real recording in the corpus exports: OTLP (decoded by opentelemetry-proto), HAR (HAR 1.2
required fields) and the textconv rendering, without an exception and with one span and one entry
per round trip (the whole corpus in the nightly run, its cover by default)."""

from __future__ import annotations

import jsonschema
import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from real_corpus import corpus_cover, corpus_files, load

from looptap.cassettes.interop import encode_request, har_chunks, render
from looptap.cassettes.reading import Run
from tests.interop.cassette_files import HAR_SCHEMA, build_request

pytestmark = pytest.mark.corpus


@pytest.mark.parametrize(
    "which",
    [
        "cover",
        pytest.param("every", marks=pytest.mark.slow(reason="every corpus file: about 20 s")),
    ],
)
def test_every_corpus_recording_exports(which: str) -> None:
    """By default the corpus' cover (:func:`corpus_cover`: each wire shape of the corpus in the
    smallest file that has it), the nightly run every file."""
    files = corpus_cover() if which == "cover" else corpus_files()
    assert len(files) > (100 if which == "cover" else 1000)
    validator = jsonschema.Draft202012Validator(HAR_SCHEMA)
    exported = 0
    for path in files:
        try:
            exchanges = load(path)
        except Exception:
            continue  # the importer's own tests cover files it refuses
        run = Run.of(exchanges, path.name)
        req = ExportTraceServiceRequest.FromString(encode_request(build_request(run)))
        spans = [s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
        assert sum(1 for s in spans if s.kind == 3) == len(exchanges), path
        assert all(
            len(s.trace_id) == 16
            and len(s.span_id) == 8
            and s.end_time_unix_nano >= s.start_time_unix_nano
            for s in spans
        )
        har = orjson.loads(b"".join(har_chunks(run)))
        errors = list(validator.iter_errors(har))
        assert not errors, f"{path}: {errors[0].message}"
        lines = list(render(run))
        assert all("\n" not in line for line in lines)
        exported += 1
    assert exported > (100 if which == "cover" else 1000)
