"""looptap's own OTel export read back by ``looptap import`` (issue 85, item 3): every field of
``show --json`` of every real recording of the corpus, walked through the round trip (the
export's OTLP/JSON written as ``export --otel`` writes it, then imported as ``import`` imports a
file, and shown again), is equal, or its difference is one :data:`ALLOWED` lists with its reason;
no round trip gets a finding it did not have (one whose request the recording could not read was
never analysed: it has none to compare).

What the round trip must keep (none of them in :data:`ALLOWED`): the family and operation, the
model asked for and the one that answered, the usage (reasoning and cache counts among them), the
calls the provider ran itself, the stream flag, the status of an API error. A call of another
operation comes back as itself (embeddings, images, speech, legacy completions:
``test_export_operations.py``, the corpus has none); round trips that are not model calls (count
tokens, a stored response's retrieval, files, MCP, non-LLM traffic) the import leaves out (its
summary says how many), never rebuilds them as chat turns.

In process (a thousand files' round trips as commands would take most of an hour): about a
minute on two cores for the whole corpus, the nightly run's (``LOOPTAP_SLOW=1``); the default run
takes the files that show every difference the whole corpus shows and each wire shape in the
smallest file that has it (178 files, about a fifth of the time). ``LOOPTAP_ROUND_TRIP_EVERY=N``
takes one file in N of the whole corpus (a sample, when iterating on the code)."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from real_corpus import CORPUS, corpus_cover, corpus_files, load, rel

from looptap.cassettes import providers
from looptap.cassettes.errors import ImportFormatError
from looptap.cassettes.interop import import_runs, iter_requests
from looptap.cassettes.reading import Run, open_run, show_objects
from looptap.cassettes.storage import check_target

pytestmark = pytest.mark.corpus

#: The differences a round trip through the GenAI conventions cannot help, by field (a path of
#: ``show --json``'s object, list positions as ``[]``; a pattern ending ``.*`` takes what is under
#: it), each with its reason.
ALLOWED: dict[str, str] = {
    # -- what an import is, and how a cassette stores it
    r"(layers\.A\.)?(read|unread(#len|\[\])?)": "what looptap could not read of the "
    "recording (a request body that is not JSON, issue 92) is not in the export: the import reads "
    "all the trace gives",
    r"reconstructed\..*": "the import marks each round trip rebuilt from a trace (what the trace "
    "gave, what looptap inferred): a recording has no such mark",
    r"request\.history\..*": "how the cassette file stores a request (a delta against an earlier "
    "one, which the corpus' YAML has not): the file written, not the run",
    r"method": "a stored response polled for (background mode: GET /responses/ID) is read as the "
    "call that delivered it; the import rebuilds the call, a POST",
    r"seq": "the import numbers the round trips it rebuilds from 0: one it left out (not a model "
    "call) leaves no gap",
    r"notes": "the import's notes on a round trip (a family it rebuilds in another's shape)",
    # -- what the GenAI conventions have no attribute for
    r"layers\.A\.rate_limit\..*": "response headers (rate limits, retry-after): no span attribute",
    r"layers\.A\.request_id": "the request id is a response header: no span attribute",
    r"layers\.E\.reasoning|reasoning": "the reasoning text of a streamed Anthropic answer, an "
    "OpenAI Responses reasoning item: no rebuilt answer renders reasoning (the signature an API "
    "needs back is not in the semconv parts)",
    r"usage\.total": "a total the API counted otherwise than input + output: no attribute",
    r"text|refusal|layers\.E\.text|layers\.E\.empty": "an answer with no text (null) rebuilt "
    "with an empty one, or the reverse",
    # -- the history, as the semconv messages carry it
    r"request\.messages|layers\.C\.appended(#len|_from)?|layers\.C\.appended\[\]\.(role|parts"
    r"(#len)?)|layers\.C\.appended\[\]\.parts\[\]\.(kind|text|media_type)": "the history as the "
    "semconv messages carry it: parts with no semconv kind (thinking blocks and their signatures, "
    "image and file bytes, cache points, an instruction message inside the history) are not "
    "rebuilt",
    r"layers\.C\.appended\[\]\.parts\[\]\.tool_(call\.(id|name)|result\.(call_id|name|content))"
    r"|layers\.C\.appended\[\]\.parts\[\]\.tool_call\.arguments\..*": "a history's tool call "
    "and result as the rebuilt answer said them (see tool_calls below): ids the span left out "
    "made up (Gemini's), an argument masked by the import's redaction",
    r"layers\.C\.appended\[\]\.parts\[\]\.tool_result\.is_error|layers\.C\.pairings(\[\]\."
    r"(is_error|call_turn|message_index))?": "a tool result's error flag: the semconv's "
    "tool_call_response part has none (the import marks it inferred); the pairing of calls and "
    "results follows from the history above",
    r"layers\.C\.(kept|link|rewritten|echoed_assistant)|layers\.C\.counts\.(sent|as_before|"
    r"changed|new|dropped)|conversation.*|turn|previous_seq": "how a request's history links to "
    "the one before (kept, rewritten, the assistant echoed, the counts that add up to what was "
    "sent), and the conversations and turns it makes, follow from the history above",
    r"layers\.C\.context\.(kind|from_seq|cleared|dropped|dropped_roles\.(user|assistant)|"
    r"dropped_tools|dropped_user|lost|task_lost|question_dropped|restore_at|summarised_calls|"
    r"summary|summary_by_seq|summary_by_side_call|restated|after_overflow)": "the context "
    "check's account of what a history dropped or summarised follows from the history above",
    r"layers\.C\.tools_offered": "the tools offered, as request.tools below",
    r"tokens\.split\.(system|tools|history|new|tool_results|input|estimated)": "the input's split "
    "by part (estimated) follows from the history and the tool schemas above",
    r"request\.tools|request\.previous_response_id": "a tool the semconv definitions have no "
    "shape for (a provider's built-in tool), and Responses' previous_response_id: no attribute",
    # -- families rebuilt in another's shape
    r"family|host|path|model_served|layers\.A\.model_served|stream|layers\.A\.stream": "a family "
    "the import does not rebuild (Cohere, Bedrock InvokeModel, Gemini's interactions) comes back "
    "as OpenAI Chat, said in its notes; its URL is the family's own",
    r"finish_reason\..*|layers\.A\.finish_reason.*|layers\.A\.complete|complete|truncated": "a "
    "finish a rebuilt answer cannot say in its family's shape (Anthropic's stop_sequence, a cut "
    "stream, an error inside a stream)",
    r"(layers\.E\.)?tool_calls(\[\]\.(arguments.*|id|kind|name|ran_by|mcp\..*))?": "a call as "
    "the rebuilt answer says it: arguments sent as an empty string rebuilt as {}, a Gemini 2 call "
    "(no id on the wire) or an MCP call's server (no attribute), a secret-looking argument masked "
    "by the import's redaction",
    r"(layers\.A\.)?error\..*|status|layers\.A\.status|analysis_errors": "an error inside a "
    "stream, rebuilt as an error answer; an error code that is not a string",
    r"usage\.cache_write|tokens\.cache_write|usage\.cache_read|tokens\.cache_read": "a cache count "
    "of 0 the family's answer has no field for (OpenAI Chat's cache writes), or the reverse",
    r"tokens\.(input|output|source|input_uncached|cumulative_input|cumulative_output)": "a count "
    "estimated where the answer reported none (tokens.source) follows from the rebuilt request; "
    "the uncached input from the cache counts above; a run's running totals from the round trips "
    "the import leaves out (not model calls)",
    r"tokens\.(cost|cost_complete|cumulative_cost|cumulative_estimated|price_estimated|"
    r"price_source)": "the price and cost follow from the family, the host and the usage above",
    r"findings(#len)?|findings\[\]\.(code|severity|layer|message|path|seq|turn|conversation|"
    r"related_turn|tool_call_id)": "the findings follow from the fields above; none is new "
    "(checked apart)",
    r"findings\[\]\.details\.(finish_reason|finish_class|finish_message|spans|type|error|"
    r"error_code|in_stream|stream|inferred|changed|cap|categories|caused_by|caused_by_seq|kind|"
    r"cleared|dropped|dropped_roles\.(user|assistant)|dropped_tools|dropped_user|from_seq|kept|"
    r"offered|question_dropped|restore_at|summarised_calls|summary|summary_by_seq|"
    r"summary_by_side_call|tool|"
    r"restated|after_overflow)": "a "
    "finding's details follow from the fields above, as the finding does",
    r"layers\.A\.model_requested|model_requested": "a request the recording could not parse (no "
    "model in it): the rebuilt one names the served model",
}
_ALLOWED = [(re.compile(k), reason) for k, reason in ALLOWED.items()]
#: Kept exactly, whatever else differs (the issue's list, and what a fork needs).
KEPT = ("usage.reasoning", "usage.input", "usage.output", "operation", "model_requested",
        "request.tool_choice", "tool_calls", "tool_calls#len")


def _flat(v: Any, pre: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _flat(x, f"{pre}.{k}" if pre else k)
    elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
        yield f"{pre}#len", len(v)
        for i, x in enumerate(v):
            yield from _flat(x, f"{pre}[{i}]")
    else:
        yield pre, v


def _field(path: str) -> str:
    return re.sub(r"\[\d+\]", "[]", path)


def _imported(v: dict[str, Any]) -> bool:
    """A round trip the import rebuilds: a model call (``generate``) of a chat API, or a call of
    another operation its family's adapter rebuilds in its own shape (an embedding, an image,
    speech, a legacy completion: ``Provider.rebuilt_operations``)."""
    adapter = providers.by_family(v["family"])
    if adapter is None:
        return False
    if adapter.rebuilt_operations:
        return v["operation"] in adapter.rebuilt_operations
    return v["operation"] == "generate" and adapter.profile.otel_operation != "text_completion"


def _codes(v: dict[str, Any]) -> Counter[str]:
    return Counter(f["code"] for f in v["findings"] if f["severity"] != "info")


def round_trip(path: Path, tmp: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(``show --json`` of the recording's model calls, of the same after the round trip)."""
    run = Run.of(load(path), path.name)
    before = [v for v in show_objects(run, path) if _imported(v)]
    otel, back = tmp / "run.otel.json", tmp / "run.jsonl"
    otel.write_bytes(b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE)
                              for r in iter_requests(run)))  # fmt: skip
    back.unlink(missing_ok=True)
    try:
        import_runs(otel, "otlp", [check_target(back, "the import's output")])
    except ImportFormatError:
        return before, []  # (no model call in it: asserted below)
    imported = open_run(back, cache=False)
    try:
        return before, list(show_objects(imported, back))
    finally:
        imported.close()


#: The files whose round trips show every difference the whole corpus' show (made by the nightly
#: case below when they no longer do).
COVER = Path(__file__).with_name("fixtures") / "round_trip_cover.txt"


def _listed() -> set[Path]:
    return {CORPUS / n for n in COVER.read_text().splitlines() if n and not n.startswith("#")}


def _cover() -> list[Path]:
    """The default run's files: :data:`COVER`'s and the corpus' cover of wire shapes
    (:func:`corpus_cover`)."""
    listed = _listed()
    missing = sorted(rel(p) for p in listed if not p.is_file())
    assert not missing, f"{COVER.name} names files the corpus has not (nightly: a new list)"
    return sorted({*listed, *corpus_cover()})


def _shown(before: list[dict[str, Any]], fields: set[str]) -> set[str]:
    """What a file's round trips show: the fields that differ, each round trip's family,
    operation and stream flag, the finding codes the recording has."""
    return {
        *(f"d:{f}" for f in fields),
        *(f"fo:{v['family']}:{v['operation']}:{v.get('stream')}" for v in before),
        *(f"c:{code}" for v in before for code in _codes(v)),
    }


def _smallest_cover(shown: dict[Path, set[str]]) -> list[str]:
    """A few files that show all ``shown`` does (greedy: the most not yet shown a byte)."""
    left, chosen = set().union(*shown.values()), []
    while left:
        best = max(shown, key=lambda p: (len(shown[p] & left) / (p.stat().st_size + 2000), p))
        chosen.append(rel(best))
        left -= shown[best]
    return sorted(chosen)


@pytest.mark.parametrize(
    "which",
    [
        "cover",
        pytest.param("every", marks=pytest.mark.slow(reason="every corpus file: about a minute")),
    ],
)
def test_the_export_round_trip_keeps_every_field_show_json_gives(
    which: str, tmp_path: Path
) -> None:
    """By default the files that show every difference the whole corpus shows (:data:`COVER`)
    and each wire shape of the corpus in the smallest file that has it (:func:`corpus_cover`):
    178 of 1,099 files. The nightly run takes every file, and fails when :data:`COVER` no longer
    shows all the whole corpus does."""
    every = int(os.environ.get("LOOPTAP_ROUND_TRIP_EVERY") or 1)
    files = _cover() if which == "cover" else corpus_files()[::every]
    read = compared = 0
    differ: Counter[str] = Counter()
    unlisted: dict[str, str] = {}
    new: Counter[tuple[str, str]] = Counter()
    shown: dict[Path, set[str]] = {}
    for path in files:
        try:
            before, after = round_trip(path, tmp_path)
        except ImportFormatError:
            continue  # a file the corpus reader refuses (its own tests cover them)
        read += 1
        assert len(after) == len(before), rel(path)
        fields: set[str] = set()
        for a, b in zip(before, after, strict=True):
            fa, fb = dict(_flat(a)), dict(_flat(b))
            for key in fa.keys() | fb.keys():
                compared += 1
                if fa.get(key) == fb.get(key):
                    continue
                field = _field(key)
                differ[field] += 1
                fields.add(field)
                kept = field in KEPT and a["request"] is not None  # (an unparsed request: none)
                if kept or not any(p.fullmatch(field) for p, _ in _ALLOWED):
                    unlisted.setdefault(field, f"{rel(path)} seq {a['seq']}")
            if a["request"] is None:
                continue  # (the recording never analysed it: its request unread; no findings)
            for code in _codes(b) - _codes(a):
                new[path.name, code] += 1
        shown[path] = _shown(before, fields)
    print(f"{read} files, {compared} fields compared; differences by field: {dict(differ)}")
    assert read > (100 if which == "cover" else 1000 // every)
    assert not unlisted, "\n".join(f"{k}: {v}" for k, v in sorted(unlisted.items()))
    assert not new, new
    if which == "every" and every == 1:
        listed = _listed()
        lost = set().union(*shown.values()) - set().union(*(shown.get(p, ()) for p in listed))
        assert not lost and listed <= shown.keys(), (
            f"{COVER.name} no longer shows {sorted(lost)} or names a file not read; a cover of the "
            "corpus as it is now:\n"
            + "\n".join(_smallest_cover(shown))
        )
