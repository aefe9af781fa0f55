"""The census of the shared corpus by family, before and after issue 14; writes docs/coverage.md.

    python bench/census.py            # print the page
    python bench/census.py --write    # regenerate docs/coverage.md

"After" is measured now, by walking every recorded interaction through import and parsing
(``tests/corpus_report.py``, the walk behind ``tests/cassettes/test_corpus.py``). "Before" is the
same walk measured at commit 28a4354 (the tree before the issue-14 adapters), kept here as data
because the code that produced it is gone. ``tests/cassettes/test_corpus.py`` asserts the after
figures that matter (no ``unknown``; ``none`` only for hosts that are not LLM APIs).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

#: tests/corpus_report.py at commit 28a4354: interactions by family.
BEFORE = {
    "openai_chat": 474,
    "gemini": 363,
    "anthropic": 334,
    "openai_responses": 324,
    "bedrock": 203,
    "none": 119,
    "unknown": 13,
}
BEFORE_UNKNOWN = (
    "13 × `POST https://api.cohere.com/v2/chat` (Cohere chat v2, with tool calls; no adapter)"
)

#: Families added for issue 14 that the shared corpus has no recording of: read from fixtures that
#: follow each API's documented schema (tests/cassettes/providers/test_more_families.py).
FIXTURE_ONLY = {
    "openai_completions": "legacy `/v1/completions` (OpenAI, Azure, vLLM, Together), streamed and "
    "not; fixtures validated against the `openai` SDK's `Completion`",
    "embeddings": "`/embeddings` (OpenAI, Azure, Mistral, vLLM, Voyage) and Cohere `/v1|v2/embed`; "
    "operation `embed`, no turn, usage only; fixtures validated against `openai`'s "
    "`CreateEmbeddingResponse`",
    "bedrock_invoke": "InvokeModel with Nova, Titan (text and embed), Llama, Mistral (text and "
    "chat), Cohere (Command, Command R), AI21 (Jamba, J2) and Claude 2 bodies; streamed; usage "
    "from the body, the stream's invocation metrics or the response headers",
    "anthropic_complete": "legacy `/v1/complete`, streamed and not "
    "(the API reports no usage: cost unknown)",
    "watsonx": "`/ml/v1/text/generation`, `generation_stream`, `chat`, `chat_stream`, `embeddings`",
    "tgi": "TGI `/generate`, `/generate_stream`, `/` and the HF Inference API `/models/{id}`",
    "sagemaker": "`/endpoints/{name}/invocations` and `-response-stream` "
    "with TGI, OpenAI-chat or JumpStart bodies",
    "openai_media": "OpenAI's images (`/images/generations`, `/edits`, `/variations`), "
    "`/audio/speech`, `/audio/transcriptions` and `/audio/translations` (issue 83): operations "
    "`image`, `speech`, `transcribe`, `translate`, no turn, the model and usage read; JSON and "
    "multipart requests, whole, plain-text, binary and streamed answers; the `openai` SDK's own "
    "requests, answers validated as its types (`tests/cassettes/providers/test_openai_media.py`)",
}

#: APIs issue 27 (item 9) found read wrongly or not at all in real recordings: what each is read as
#: now, and the real shape its test uses (tests/cassettes/providers/test_real_shapes.py).
REAL_SHAPES = {
    "bedrock_invoke (guardrails)": "`amazon-bedrock-guardrailAction` / `-trace` beside a body or "
    "stream chunk (InvokeModel API reference) never hide the model's text (Nova streams lost all "
    "of it); `INTERVENED` ends the answer as `prompt_blocked` (the trace's `input` blocked) or "
    "`filtered`, whole, never truncated (Titan)",
    "bedrock_invoke (imported models)": "Custom Model Import's OpenAI Completions body and chunks "
    "(`choices[].text`, `usage`), validated as the `openai` SDK's `Completion`",
    "writer": "`api.writer.com` `/v1/chat` (OpenAI Chat bodies) and `/v1/completions` "
    '(`choices[].text`, no finish, no usage; streamed as `{"value"}` events with no end marker: '
    "completeness unknown, never truncated); shapes from writer-sdk-python 3.0.0's types",
    "replicate": "predictions (create, poll, cancel): language-model output pieces joined as text, "
    "image outputs as media, `metrics` token counts, status `starting`/`processing` not finished, "
    "`succeeded`/`failed`/`canceled`; on replicate-python's own recordings",
    "aleph_alpha": "`/complete` and PhariaAI's `/v1/complete` (no longer read as Anthropic's), "
    "streamed `stream_chunk`/`stream_summary`/`completion_summary`; on aleph-alpha-client's own "
    "recordings",
    "cohere (generate)": "`/v1/generate` and its NDJSON stream (`text-generation`, `stream-end` "
    "with `response.generations`); shapes from cohere-python's `Generation` / "
    "`GenerateStreamedResponse`",
    "embeddings (Vertex)": "Vertex AI `…/models/{m}:predict` with text-embedding instances: "
    "operation `embed`, tokens from `statistics.token_count`; other `:predict` models are not "
    "claimed",
    "watsonx": "also IBM's `/v2/text/generation_stream` on its own hosts (the `/ml/v1` routes were "
    "read before); SSE `id`/`event: message` events as the ibm-watsonx-ai SDK receives them",
    "a2a": "A2A JSON-RPC (`message/send`, `message/stream`, `tasks/*`, 1.0's `SendMessage` …) is "
    "its own protocol, no longer labelled MCP nor offered to the MCP checks; `show --json` "
    "summarises what was sent, the task state and the reply (a2a-python's types)",
}


def render() -> str:
    from corpus_report import walk

    rep = walk()
    after = dict(rep.by_family)
    fams = sorted(
        set(BEFORE) | set(after), key=lambda f: (f in ("none", "unknown"), -after.get(f, 0), f)
    )
    out = [
        "# Coverage: which recorded calls looptap reads",
        "",
        "Generated by `python bench/census.py --write`; do not edit by hand.",
        "",
        f"The shared corpus (`tests/corpus/`): {rep.files} cassette files, {rep.exchanges} HTTP "
        "interactions. `unknown` means an LLM-looking call no adapter can read; `none` means not "
        "an LLM call.",
        "",
        "| family | before (28a4354) | after |",
        "|---|---:|---:|",
    ]
    for f in fams:
        out.append(f"| `{f}` | {BEFORE.get(f, 0)} | {after.get(f, 0)} |")
    out += [
        "",
        "By family, operation and framing (after):",
        "",
        "| family | operation | body | n |",
        "|---|---|---|---:|",
    ]
    for (fam, op, stream), n in sorted(rep.by_family_stream.items()):
        out.append(f"| `{fam}` | {op} | {'stream' if stream else 'json'} | {n} |")
    out += ["", f"**unknown** before: {BEFORE_UNKNOWN}.", ""]
    if rep.unknown:
        out.append(f"**unknown** after: {len(rep.unknown)}:")
        out += [f"- `{f}` #{i} {url}" for f, i, url in rep.unknown]
    else:
        out.append("**unknown** after: none.")
    out += [
        "",
        f"**none** after ({sum(rep.none_hosts.values())}; not LLM calls — downloads, MCP, search, "
        "OAuth, file / vector-store / conversation APIs, model lists), by host:",
        "",
    ]
    out += [f"- `{host}`: {n}" for host, n in rep.none_hosts.most_common()]
    out += [
        "",
        f"Analysis errors after: {len(rep.errors)} (both broken recordings: see "
        "`tests/cassettes/test_corpus.py`).",
        "",
        "## Families read without a corpus recording",
        "",
        "The shared corpus has no recording of these; each "
        "is tested on fixtures that follow the API's",
        "documented schema (`tests/cassettes/providers/test_more_families.py`):",
        "",
    ]
    out += [f"- `{f}`: {what}" for f, what in FIXTURE_ONLY.items()]
    out += [
        "",
        "## Checked against the official SDK",
        "",
        "- `cohere` (the 13 corpus calls): every response validates "
        "as the `cohere` SDK's (7.3.1) `ChatResponse` and",
        "  every request message as `ChatMessageV2`; looptap's text, tool calls (id, name, "
        "arguments), finish reason",
        "  and billed usage agree with the SDK's reading in "
        "13 of 13. The stream and v1 fixtures validate as",
        "  `StreamedChatResponseV2` / `StreamedChatResponse` "
        "events. (Run in a scratch venv: the SDK is not a",
        "  project dependency.) Cost via genai-prices: `cohere/command-r7b` on every turn.",
        "- `openai_completions`, `embeddings`: fixtures validated against "
        "`openai.types.Completion` /",
        "  `CreateEmbeddingResponse` inside the tests.",
        "- `anthropic_complete`: the installed `anthropic` "
        "SDK no longer ships the `Completion` type; checked",
        "  against the documented response only. Bedrock, "
        "watsonx, TGI, SageMaker: documented schemas only.",
        "",
        "## APIs read from real shapes (issue 27)",
        "",
        "Found read wrongly or not at all in real recordings; "
        "each is tested on its real shape, from an official",
        "SDK's own recordings (`tests/cassettes/providers/recorded/`) or its types",
        "(`tests/cassettes/providers/test_real_shapes.py`). None "
        "of these changes the reading of any corpus call:",
        "a per-call comparison of family, operation, framing, "
        "finish, completeness and text length over the",
        f"{rep.exchanges} interactions finds no difference.",
        "",
    ]
    out += [f"- `{f}`: {what}" for f, what in REAL_SHAPES.items()]
    out += ["", "## APIs shut down by their vendors (issue 72)", "", *SHUT_DOWN]
    out += _read_state_section(rep.exchanges)
    return "\n".join(out) + "\n"


def _read_state_section(exchanges: int) -> list[str]:
    """Issue 92: how each round trip of the corpus was read, each family's stream-end evidence,
    the compatible servers' stream ends found in the wild, and the shapes read from other
    projects' recordings."""
    from collections import Counter

    from real_corpus import corpus_files

    from looptap.cassettes import providers
    from looptap.cassettes.parsing import parse_all
    from looptap.cassettes.storage import load_vcr

    states: Counter[str] = Counter()
    said: Counter[str] = Counter()
    for path in corpus_files():
        for rt in parse_all(load_vcr(path)):
            states[rt.read or "not an LLM call"] += 1
            said.update(u.split(": ", 1)[-1] if u.startswith("message ") else u for u in rt.unread)
    out = [
        "",
        "## How each round trip was read (issue 92)",
        "",
        "Every round trip says how looptap read it (`show`, `show --json`'s `read` and `unread`, "
        "the HTML report, the",
        "inspector, the fleet): `complete`, `partial` (what was not read is listed; no finding "
        "rests on it) or `unread`.",
        f"Over the shared corpus ({exchanges} interactions):",
        "",
        "| read | round trips |",
        "|---|---:|",
        *(f"| {k} | {n} |" for k, n in sorted(states.items())),
        "",
        "What was not read in the corpus, and how often:",
        "",
        *(f"- {k}: {n}" for k, n in said.most_common()),
        "",
        "## Stream ends: each family's terminal evidence (issue 92)",
        "",
        "A stream is truncated only when its family's evidence says so (no finish, the connection "
        "cut inside an event,",
        "an error event), never by a missing terminator alone where the finish reason is the "
        "evidence (`Profile.stream_end`):",
        "",
        "| family | the stream ended whole when |",
        "|---|---|",
    ]
    for fam in providers.FAMILIES:
        p = providers.by_family(fam)
        if p is not None and p.profile.stream_end:
            out.append(f"| `{fam}` | {p.profile.stream_end} |")
    return out + ["", *STREAM_ENDS_IN_THE_WILD, "", *WILD_SHAPES]


#: OpenAI-compatible servers' stream ends, as their sources, issues and docs show them.
STREAM_ENDS_IN_THE_WILD = [
    "### Stream ends of OpenAI-compatible servers, from their sources",
    "",
    "Each read from the server's own code where it is public (`repo@commit:path`, fetched "
    "2026-11-28), else its API",
    "reference; each scripted byte for byte in that shape in "
    "`tests/cassettes/providers/test_compat_stream_ends.py`",
    "(whole: text, finish, usage, read `complete`, no `A.stream_truncated` / "
    "`A.unusual_finish` / `A.usage_missing`;",
    "failed: the error read as one). All are read by the `openai_chat` row above.",
    "",
    "| server | how a chat stream ends | error mid-stream | source |",
    "|---|---|---|---|",
    "| vLLM | finish chunk (`finish_reason` and vLLM's `stop_reason`); usage on every chunk "
    "with `continuous_usage_stats`; a usage chunk with `choices: []`; `[DONE]` | "
    '`data: {"error": {"object": "error", "message", "type", "code"}}`, then `[DONE]` | '
    "vllm-project/vllm@5e918640:vllm/entrypoints/openai/chat_completion/serving.py, "
    "@7ded96b3:vllm/entrypoints/openai/serving_engine.py |",
    "| Ollama `/v1` | finish chunk with an empty delta; with `include_usage` the same chunk "
    'with `choices: []` and usage; `[DONE]` | none said: the server\'s `{"error"}` line is '
    "decoded as an empty chunk and the stream ends with no finish and no `[DONE]`: truncated "
    "| ollama/ollama@fb307609:middleware/openai.go, openai/openai.go, server/routes.go |",
    "| Ollama `/api/chat` (native) | NDJSON, the last line `done: true` with `done_reason` and "
    'the counts | one more line `{"error": "…"}`, then the end | '
    "ollama/ollama@fb307609:server/routes.go (`streamResponse`) |",
    "| Hugging Face TGI | `:` keep-alive comments; finish chunk (`stop`, `length`, "
    '`stop_sequence`); a usage chunk with `id: ""` and `choices: []`; `[DONE]` | '
    '`data: {"error": {"message", "http_status_code": 422}}`, then `[DONE]` | '
    "huggingface/text-generation-inference@db931fcf:router/src/server.rs, router/src/chat.rs, "
    "router/src/infer/mod.rs |",
    "| llama.cpp server | finish chunk with `usage` and `timings`; `[DONE]` | an `error: {…}` "
    "line (not `data:`), then `[DONE]` | ggml-org/llama.cpp@61e588ab:examples/server/server.cpp, "
    "@15ae7dd5:examples/server/utils.hpp (`server_sent_event`) |",
    "| OpenRouter | `: OPENROUTER PROCESSING` comments; finish chunk (with "
    "`native_finish_reason`); usage (with `cost`) in a last chunk with `choices: []`; `[DONE]` "
    '| a chunk with `error` and a choice with `finish_reason: "error"` | '
    "openrouter.ai/docs/api-reference/streaming (closed source) |",
    "| Mistral (la plateforme) | usage on the finish chunk; `[DONE]` | an HTTP error before "
    "the stream | mistralai/client-python@05629d23:src/mistralai/client/models/completionchunk.py "
    '(`sentinel="[DONE]"` in its chat.py) |',
    "| DeepSeek | `: keep-alive` comments while queued; usage (with `prompt_cache_hit_tokens`) "
    "on the last chunk; `[DONE]` | - | api-docs.deepseek.com (closed source) |",
    "| Groq | `x_groq.id` on the first and last chunk; usage in the last chunk's "
    "`x_groq.usage`; `[DONE]` | `x_groq.error`: why the stream stopped early | "
    "groq/groq-python@8ae355a1:src/groq/types/chat/chat_completion_chunk.py (`XGroq`); real "
    "streams in the corpus (pydantic-ai's `test_groq` cassettes) |",
    '| Together | finish (`eos`, `stop`, `length`, `tool_calls`, `error`; `""` for none) and '
    'usage on the last chunk; `[DONE]` | `finish_reason: "error"` | '
    "togethercomputer/together-python@e6069871:src/together/types/chat_completions.py, "
    "@83bd56f3:src/together/types/common.py |",
    "| Fireworks | finish and usage on the last chunk; `[DONE]` | - | its API reference "
    "(closed source; not read from source) |",
    "| LM Studio | OpenAI's own endpoint (lmstudio.ai/docs/api/openai-api) | - | the server is "
    "not open source; not read from source |",
    "",
    "Read wrongly before, fixed by evidence: llama.cpp's `error:` event (it was a payload that "
    "is not JSON, skipped, and",
    "`[DONE]` made the answer whole, with no finish and no error: now an error event, finish "
    "`error`); Groq's",
    "`x_groq.usage` (usage unread: an `A.usage_missing` on every Groq stream; now read) and "
    "`x_groq.error` (now the",
    "stream's error); TGI's `stop_sequence` and Together's `eos` finishes (an "
    "`A.unusual_finish`; now `complete`), and",
    'Together\'s `""` finish (its none: read as a finish, the stream whole by it; now none).',
    "",
    "Other servers' stream ends found in their issue trackers (read by the same row: whole by "
    "the finish chunk when",
    "no `[DONE]` comes):",
    "",
    "- ik_llama.cpp sent no `[DONE]` until its PR 470 added `--send-done` (2025-06), off by "
    "default (its issue 467).",
    "- gpustack/llama-box: no `[DONE]` on `/v1/chat/completions` (its issue 2, fixed 2024-07).",
    "- Hugging Face TGI: no `[DONE]` on `/v1/chat/completions` and `/v1/completions` before PR "
    "2221 (2024-07).",
    "- mistral.rs: no `[DONE]` before PR 1226 (2025-03).",
    "- oobabooga text-generation-webui: no `[DONE]` on its completions stream (issue 4778, "
    "2023-12).",
    '- vllm-mlx 0.4.0: `[DONE]`, but no chunk carries `finish_reason: "stop"` on a natural stop '
    "(issue 628); sglang",
    "  v0.4.4: `finish_reason` always null (issue 4550): both read whole by `[DONE]`, their "
    "finish unknown.",
    "- Gemini's OpenAI-compatible endpoint (beta, 2024-12): the finish in `finishReason`, "
    "`finish_reason` null",
    "  (llmcord issue 84): whole by `[DONE]`.",
]

#: Shapes other projects' recordings carry, read since issue 92 (tests/cassettes/providers/
#: test_wild_recordings.py, on the cassettes in recorded/).
WILD_SHAPES = [
    "Shapes from other projects' recordings (DataDog/dd-trace-py, DataDog/dd-apm-test-agent; "
    "`tests/cassettes/providers/test_wild_recordings.py`):",
    "",
    "- vcrpy's aiohttp stub writes header names as multidict's `istr` "
    "(`!!python/object/apply:` or `/new:`",
    "  `multidict._multidict.istr`): read as the names; any other tag refused, named.",
    '- Bedrock InvokeModel, Cohere Command: the last chunk `{"is_finished": true, '
    '"finish_reason": …}` ends the stream;',
    "  `num_generations` > 1: generation 0 is the answer, the others counted in a note. Cohere "
    "and Amazon Rerank: operation `rerank`.",
    "- OpenAI Chat: an audio answer (`content: null`) read by `audio.transcript`; "
    "gpt-4-vision-preview's",
    '  `finish_details: {"type": "max_tokens"}`; a JSON object as `message.content` '
    "(Cloudflare Workers AI) read as its text;",
    "  Mistral's `thinking` content blocks, `document_url`, OpenRouter's `video_url`.",
    "- A model call recorded without its request body: a turn, read `partial`, its answer "
    "judged, nothing of what it sent.",
    "- Kept as sent, read as what they are (not `unread`): Responses' hosted tools' items "
    "(`web_search_call`, `mcp_call`,",
    "  `compaction` …), Anthropic's `container_upload`, `tool_addition`, `search_result`, "
    "`compaction` blocks, Converse's",
    "  `cachePoint`, `guardContent`, `citationsContent`, `searchResult`.",
]


#: What the section on APIs their vendors shut down says (docs/coverage.md).
SHUT_DOWN = [
    "An API its vendor has shut down (its endpoints answer errors now) is not read when no corpus "
    "recording",
    "holds it: a user's old recording of it reads as traffic of an API looptap does not know, "
    "each round",
    "trip listed as it was sent (`none`, or `unknown` where the body looks like an LLM call), with "
    "no turn",
    "and no finding (`tests/cassettes/providers/test_retired_apis.py`, on the `openai` SDK's own "
    "requests).",
    "",
    "- OpenAI Assistants (`/v1/assistants`, `/v1/threads`, runs and run steps): shut down on "
    "2026-08-26",
    '  ("The Assistants API was officially sunset on August 26, 2026, and is no longer available",',
    "  developers.openai.com/api/docs/assistants/migration). Its threads live on as Conversations "
    "and its",
    "  runs as Responses, which are read.",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write docs/coverage.md")
    args = ap.parse_args()
    text = render()
    if args.write:
        (ROOT / "docs" / "coverage.md").write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
