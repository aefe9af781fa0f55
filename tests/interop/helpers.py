"""Paths and helpers shared by the interoperability tests."""

from __future__ import annotations

from pathlib import Path

from cassettes.store import CassetteWriter
from cassettes.vcr import load_vcr

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
