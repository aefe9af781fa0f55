"""``--live NAME=URL`` (a fork's replay server), ``--upstream NAME=URL`` (compare, why, record,
run) and the pytest plugin's ``--looptap-upstream NAME=URL`` are read by one function,
:func:`cassettes.replay.live.upstreams.bases_of`."""

from __future__ import annotations

import pytest

from looptap.cassettes import providers
from looptap.cassettes.replay.forking.compare.budget import upstream_bases
from looptap.cassettes.replay.live.upstreams import bases_of


def test_an_item_names_its_api_and_a_base_url() -> None:
    got = bases_of([" OpenAI =http://127.0.0.1:9/v1/ ", "anthropic=https://h"], "--live")
    assert got == {"openai": "http://127.0.0.1:9/v1", "anthropic": "https://h"}


@pytest.mark.parametrize("item", ["openai", "openai=127.0.0.1:9", "=ftp://x", " =http://x"])
def test_an_item_of_another_form_is_refused_naming_the_flag(item: str) -> None:
    with pytest.raises(ValueError, match=r"^--live wants NAME=http\(s\)://host\[:port\], not "):
        bases_of([item], "--live")


def test_upstream_overrides_a_vendor_in_its_place_and_adds_the_others_after() -> None:
    vendors = list(providers.REVERSE_UPSTREAMS)
    got = upstream_bases([f"{vendors[0]}=http://127.0.0.1:9", "zzz=http://127.0.0.1:8"])
    assert list(got) == [*vendors, "zzz"]
    assert got[vendors[0]] == "http://127.0.0.1:9"
    with pytest.raises(ValueError, match=r"^--upstream wants"):
        upstream_bases(["nothing"])


class _Config:
    """The one option :func:`upstreams` reads of pytest's config."""

    def __init__(self, items: list[str]) -> None:
        self.items = items

    def getoption(self, name: str) -> list[str]:
        assert name == "--looptap-upstream"
        return self.items


def test_the_plugins_upstream_is_read_by_the_same_function() -> None:
    from looptap.cassettes.replay.testing._options import upstreams

    got = upstreams(_Config([" OpenAI =http://127.0.0.1:9/v1/ "]))  # type: ignore[arg-type]
    assert got == {"openai": "http://127.0.0.1:9/v1"}
    # a nameless item went on to the recorder, which refused it in a child process
    with pytest.raises(pytest.UsageError, match=r"^looptap: --looptap-upstream wants NAME="):
        upstreams(_Config([" =http://127.0.0.1:9"]))  # type: ignore[arg-type]
