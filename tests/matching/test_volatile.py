"""Volatile spans: what each built-in detector replaces, what it leaves alone, and what two
requests that differ only there tolerate (cassettes/matching/_volatile.py)."""

from __future__ import annotations

import pytest

from looptap.cassettes.matching import Tolerated, VolatileSpans, tolerated
from looptap.cassettes.matching._volatile import Span

V = VolatileSpans(
    cwd="/home/bob/proj",
    home="/home/bob",
    recorded_cwd=["/home/alice/work/proj"],
    recorded_home=["/home/alice"],
)


@pytest.mark.parametrize(
    ("text", "compared", "originals"),
    [
        ("Today's date is 2026-11-25.", "Today's date is <date>.", ["2026-11-25"]),
        ("Wed Nov 25 06:00:33 UTC 2026", "<datetime>", ["Wed Nov 25 06:00:33 UTC 2026"]),
        ("Wed, 25 Nov 2026 06:00:33 GMT", "<datetime>", ["Wed, 25 Nov 2026 06:00:33 GMT"]),
        ("on November 25, 2026 we met", "on <date> we met", ["November 25, 2026"]),
        ("due 25/11/2026 or 11/25/2026", "due <date> or <date>", ["25/11/2026", "11/25/2026"]),
        ("started 2026-11-25T06:00:33.120Z", "started <datetime>", ["2026-11-25T06:00:33.120Z"]),
        ("at 06:00:33 UTC, or 10:30 am", "at <time>, or <time>", ["06:00:33 UTC", "10:30 am"]),
        (
            "-rw-r--r-- 1 bob bob 1037 Nov 24 09:12 a.py",
            "-rw-r--r-- 1 bob bob 1037 <datetime> a.py",
            ["Nov 24 09:12"],
        ),
        (
            '{"ts": 1732512033, "created_at": 1732512033123}',
            '{"ts": <epoch>, "created_at": <epoch>}',
            ["1732512033", "1732512033123"],
        ),
        (
            "5 passed in 1.23s; took 12 ms; it took 3 seconds (0.52s)",
            "5 passed in <duration>; took <duration>; it took <duration> (<duration>)",
            ["1.23s", "12 ms", "3 seconds", "0.52s"],
        ),
        (
            "id 123e4567-e89b-12d3-a456-426614174000",
            "id <uuid>",
            ["123e4567-e89b-12d3-a456-426614174000"],
        ),
        (
            "session_3f1c2a9e-0b7d-4c1e-9a55-2b8f6e1d0c44",
            "session_<uuid>",
            ["3f1c2a9e-0b7d-4c1e-9a55-2b8f6e1d0c44"],
        ),
        (
            "call_Xk3jd9Qp2LmN8vR4tY6wZ1aB, toolu_01A09q90qw90lq917835lq9",
            "call_<id>, toolu_<id>",
            ["Xk3jd9Qp2LmN8vR4tY6wZ1aB", "01A09q90qw90lq917835lq9"],
        ),
        (
            "chatcmpl-AbCdEf1234567890XyZw req_011CVabc123DEF456ghi789",
            "chatcmpl-<id> req_<id>",
            ["AbCdEf1234567890XyZw", "011CVabc123DEF456ghi789"],
        ),
        (
            "trace 3f2a9c1d4e5b6a7f8091a2b3c4d5e6f7",
            "trace <id>",
            ["3f2a9c1d4e5b6a7f8091a2b3c4d5e6f7"],
        ),
        ("wrote /tmp/tmpk3j_x9qa/out.txt", "wrote <tmp>/out.txt", ["/tmp/tmpk3j_x9qa"]),
        (
            "/tmp/pytest-of-bob/pytest-12/test_thing0/a.py",
            "<tmp>/a.py",
            ["/tmp/pytest-of-bob/pytest-12/test_thing0"],
        ),
        ("/var/folders/xy/abcdefgh12345678/T/x", "<tmp>/x", ["/var/folders/xy/abcdefgh12345678/T"]),
        (
            "/home/bob/proj/src/x.py /home/bob/.bashrc",
            "<cwd>/src/x.py <home>/.bashrc",
            ["/home/bob/proj", "/home/bob"],
        ),
        (
            "/home/alice/work/proj/y.py /home/alice/notes",
            "<cwd>/y.py <home>/notes",
            ["/home/alice/work/proj", "/home/alice"],
        ),
        (
            "http://127.0.0.1:54321/v1 localhost:8080 [::1]:9000",
            "http://127.0.0.1:<port>/v1 localhost:<port> [::1]:<port>",
            ["54321", "8080", "9000"],
        ),
    ],
)
def test_each_detector_replaces_its_span_and_keeps_the_original(
    text: str, compared: str, originals: list[str]
) -> None:
    got, found = V.normalise(text)
    assert got == compared
    assert [t for _, t in found] == originals


@pytest.mark.parametrize(
    "text",
    [
        "model gpt-4o-2024-08-06",  # a date glued to a model name is the model
        "claude-sonnet-4-5-20250929",
        "file run-2026-11-25.log",  # a date in a file name is the file's name
        # numbers, an epoch without its word
        "count: 42, temperature 0.7, max 5 retries, 1732512033 apples",
        "wait 5 minutes; ratio 3:2; version 1.2.3; Claude 3.5 Sonnet",
        "get_weather_forecast and user_profile_v2",  # names, no random token
        # not the home, not the cwd (a prefix of a name, inside a path)
        "/home/bobby/x /mnt/home/bob/proj",
        "https://example.com:8443/x 10.0.0.1:5000",  # not loopback
        "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTBhYmNkZWY=",  # base64 is not an id
    ],
)
def test_text_that_is_not_volatile_is_left_as_it_is(text: str) -> None:
    assert V.normalise(text) == (text, ())


def test_encoded_data_is_never_scanned() -> None:
    blob = "a1B2" * 5000 + " 2026-11-25"  # no whitespace in its first 4 KB: an encoded blob
    assert V.normalise(blob) == (blob, ())
    assert V.normalise("data:text/plain;base64,MjAyNi0xMS0yNQ== 2026-11-25")[1] == ()


def test_cwd_and_home_only_when_they_can_mean_something() -> None:
    """``/`` or a one-level cwd would claim every path; a cwd in a temp directory is a temp path
    (both runs of a pytest test under ``tmp_path``: ``<tmp>`` on both sides)."""
    assert VolatileSpans(cwd="/", home="/root").normalise("/usr/bin/env") == ("/usr/bin/env", ())
    in_tmp = VolatileSpans(cwd="/tmp/pytest-of-bob/pytest-3/test_a0", home="/home/bob")
    assert in_tmp.cwds == []
    assert in_tmp.normalise("/tmp/pytest-of-bob/pytest-3/test_a0/x")[0] == "<tmp>/x"
    assert VolatileSpans(cwd="/srv/app/", home="/srv/app").cwds == ["/srv/app"]  # once, as a cwd


def test_this_process_cwd_and_home_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("HOME", "/home/carol")
    monkeypatch.chdir("/usr/lib")
    v = VolatileSpans()
    assert v.normalise("/usr/lib/x and /home/carol/y") == (
        "<cwd>/x and <home>/y",
        (("cwd", "/usr/lib"), ("home", "/home/carol")),
    )


def test_tolerated_pairs_spans_path_by_path() -> None:
    rec = [
        Span(("system",), "date", "2026-11-24"),
        Span(("messages", 1, "content"), "uuid", "a"),
        Span(("messages", 1, "content"), "tmp", "/tmp"),
    ]
    live = [
        Span(("messages", 1, "content"), "uuid", "b"),
        Span(("messages", 1, "content"), "tmp", "/tmp"),
        Span(("system",), "date", "2026-11-25"),
    ]
    assert tolerated(rec, live) == [
        Tolerated(("system",), "date", "2026-11-24", "2026-11-25"),
        Tolerated(("messages", 1, "content"), "uuid", "a", "b"),
    ]
    assert tolerated(rec, rec) == []


#: The recording's own time in the epoch tests (2026-11-25T21:58:26Z).
RECORDED = 1795643906.0


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # issue 55: seconds and milliseconds, with a fraction or not, with no timestamp word
        ("Current time: 1795643906.95.", ["1795643906.95"]),
        ("The clock reads 1795650000 now", ["1795650000"]),
        ("It is 1795643906950 ms since the epoch", ["1795643906950"]),
        ("started 1795643906.123456 and 1764107906", ["1795643906.123456", "1764107906"]),
        # far from the recording's time (more than a year): a number, significant
        ("order 1234567890 ships; 1732512033 apples; 1900000000000", []),
        # glued to a word or a version, or longer: not an epoch
        ("v1795643906 build-1795643906 17956439069501 1795643906.95.3", []),
    ],
)
def test_an_epoch_near_the_recordings_time_is_volatile_without_its_word(
    text: str, found: list[str]
) -> None:
    spans = VolatileSpans(cwd="/home/bob/proj", home="/home/bob", recorded_time=RECORDED)
    assert [t for d, t in spans.normalise(text)[1] if d == "epoch"] == found
    # without the recording's time, a bare number is never an epoch
    assert [t for d, t in V.normalise(text)[1] if d == "epoch"] == [
        t for t in found if "time: " in text
    ]


def test_the_recordings_time_is_its_headers_created_time() -> None:
    from looptap.cassettes.matching import volatile_for
    from looptap.cassettes.reading import header_time as recorded_time

    header = {"created": "2026-11-25T21:58:26.000Z", "meta": {}}
    assert recorded_time(header) == RECORDED
    assert volatile_for(header).recorded_time == RECORDED
    assert recorded_time({"created": "not a date"}) is None and recorded_time(None) is None


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # Claude Code's sub-agent: its id in the Agent tool's result and in the task notification
        # (issue 55: a fork past a sub-agent missed on it), the notification's duration
        (
            "agentId: ae663a9a07429144b (internal ID - Use SendMessage with to: "
            "'ae663a9a07429144b')\noutput_file: /tmp/claude-0/x/tasks/ae663a9a07429144b.output",
            [("id", "ae663a9a07429144b")] * 2
            + [("tmp", "/tmp/claude-0")]
            + [("id", "ae663a9a07429144b")],
        ),
        (
            "<task-id>a4a0f46b1d45f2b67</task-id><usage><tool_uses>1</tool_uses>"
            "<duration_ms>280</duration_ms></usage>",
            [("id", "a4a0f46b1d45f2b67"), ("duration", "280")],
        ),
        ('{"durationMs": 1250, "elapsed_s": 1.5}', [("duration", "1250"), ("duration", "1.5")]),
        # not random (no digits, or too few), not a duration key (no unit), a key glued to a token
        (
            "deadbeefdeadbeef 1234567890123456 abcdef0123 latency: 30 durations: 5 "
            "sk-ae663a9a07429144b",
            [],
        ),
    ],
)
def test_short_agent_ids_and_keyed_durations(text: str, found: list[tuple[str, str]]) -> None:
    assert list(V.normalise(text)[1]) == found
