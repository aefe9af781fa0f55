"""Paths and helpers shared by the interoperability tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from looptap.cassettes.interop import iter_requests
from looptap.cassettes.reading import Run
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import load_vcr

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "corpus" / "pydantic-ai" / "tests" / "models" / "cassettes"
#: Reasoning parts, a tool call and its result, cache-read and reasoning tokens (Responses API).
REASONING = CORPUS / "test_deepseek_responses" / "test_deepseek_responses[function_tool].yaml"
#: Cache writes and reads (Bedrock Converse).
CACHE_WRITE = CORPUS / "test_bedrock" / "test_bedrock_cache_write_and_read.yaml"
FIXTURES = Path(__file__).parent / "fixtures"


def write_cassette(src_yaml: Path, dest: Path) -> Path:
    with CassetteWriter(dest, meta={"source": "vcr", "imported_from": src_yaml.name}) as w:
        for ex in load_vcr(src_yaml):
            w.append(ex)
    return dest


def build_request(run: Run, content: bool = True) -> dict[str, Any]:
    """The one OTLP/JSON request ``export --otel`` writes for a run of under 1,000 spans."""
    (req,) = iter_requests(run, content)
    return req


_NV = {
    "type": "object",
    "required": ["name", "value"],
    "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
}
_NUM = {"type": "number"}
#: HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/): every object with its required fields.
HAR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["log"],
    "properties": {
        "log": {
            "type": "object",
            "required": ["version", "creator", "entries"],
            "properties": {
                "version": {"const": "1.2"},
                "creator": {"type": "object", "required": ["name", "version"]},
                "pages": {"type": "array"},
                "entries": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": [
                            "startedDateTime",
                            "time",
                            "request",
                            "response",
                            "cache",
                            "timings",
                        ],
                        "properties": {
                            "startedDateTime": {
                                "type": "string",
                                "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|"
                                r"[+-]\d\d:\d\d)$",
                            },
                            "time": {"type": "number", "minimum": 0},
                            "request": {
                                "type": "object",
                                "required": [
                                    "method",
                                    "url",
                                    "httpVersion",
                                    "cookies",
                                    "headers",
                                    "queryString",
                                    "headersSize",
                                    "bodySize",
                                ],
                                "properties": {
                                    "cookies": {"type": "array", "items": _NV},
                                    "headers": {"type": "array", "items": _NV},
                                    "queryString": {"type": "array", "items": _NV},
                                    "postData": {
                                        "type": "object",
                                        "required": ["mimeType", "text"],
                                    },
                                    "headersSize": {"type": "integer"},
                                    "bodySize": {"type": "integer"},
                                },
                            },
                            "response": {
                                "type": "object",
                                "required": [
                                    "status",
                                    "statusText",
                                    "httpVersion",
                                    "cookies",
                                    "headers",
                                    "content",
                                    "redirectURL",
                                    "headersSize",
                                    "bodySize",
                                ],
                                "properties": {
                                    "status": {"type": "integer"},
                                    "cookies": {"type": "array", "items": _NV},
                                    "headers": {"type": "array", "items": _NV},
                                    "content": {
                                        "type": "object",
                                        "required": ["size", "mimeType"],
                                        "properties": {
                                            "size": {"type": "integer"},
                                            "text": {"type": "string"},
                                            "encoding": {"type": "string"},
                                        },
                                    },
                                    "redirectURL": {"type": "string"},
                                },
                            },
                            "cache": {"type": "object"},
                            "timings": {
                                "type": "object",
                                "required": ["send", "wait", "receive"],
                                "properties": {
                                    "send": {"type": "number", "minimum": 0},
                                    "wait": {"type": "number", "minimum": 0},
                                    "receive": {"type": "number", "minimum": 0},
                                    "blocked": _NUM,
                                    "dns": _NUM,
                                    "connect": _NUM,
                                    "ssl": _NUM,
                                },
                            },
                        },
                        # custom fields must start with an underscore
                        "propertyNames": {
                            "pattern": "^(_.*|startedDateTime|time|request|response|cache|timings|"
                            "serverIPAddress|connection|comment|pageref)$"
                        },
                    },
                },
            },
        }
    },
}
