"""Issue 92: recordings other projects' test suites made, read as they are in the wild.

Every cassette here is verbatim from another project (``recorded/``, README there: repository,
commit, licence). Each test failed on c86d115d.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from looptap.cassettes.errors import ImportFormatError
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.storage import load_vcr, read_vcr

RECORDED = Path(__file__).parent / "recorded"


def _rts(name: str) -> list[RoundTrip]:
    return [parse_exchange(ex) for ex in load_vcr(RECORDED / name)]


# -- 1. YAML written by vcrpy's aiohttp stub -------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "tag"),
    [
        ("dd-apm-test-agent/openai_chat_completions_post_ae4728c2.yaml", "apply"),
        ("dd-apm-test-agent/anthropic_v1_messages_post_26d618ee.yaml", "new"),
    ],
)
def test_aiohttp_header_tags_are_read_as_the_names_they_wrap(name: str, tag: str) -> None:
    """Was: "not valid YAML: could not determine a constructor for the tag …": the whole file
    refused, every call in it unread."""
    assert f"!!python/object/{tag}:multidict._multidict.istr" in (RECORDED / name).read_text()
    exchanges = load_vcr(RECORDED / name)
    names = {k.lower() for ex in exchanges for k, _ in ex.request_headers}
    assert {"accept", "content-type"} <= names
    rts = [parse_exchange(ex) for ex in exchanges]
    assert rts and all(rt.response is not None and rt.response.complete for rt in rts)
    assert all(rt.request is not None and rt.request.messages for rt in rts)


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        ("a: !!python/object/apply:os.system [ls]", "!!python/object/apply:os.system"),
        ("a: !!python/object/new:multidict._multidict.istr [[1, 2]]", "multidict._multidict.istr"),
        ("a: !!python/name:builtins.eval ''", "!!python/name:builtins.eval"),
        ("a: !custom 1", "!custom"),
    ],
)
def test_any_other_tag_is_refused_naming_it(doc: str, named: str) -> None:
    """Nothing is constructed: a tag that is not a header name's, or one around anything but a
    single string, refuses the file with the tag in the message (not "not valid YAML")."""
    with pytest.raises(ImportFormatError) as e:
        list(read_vcr(doc, "x.yaml"))
    assert named in str(e.value) and "not valid YAML" not in str(e.value)
