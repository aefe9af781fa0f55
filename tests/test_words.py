"""What the inspector and search show of long values: whole words, whole pairs, JSON not Python."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from cassettes.views.search import snippet_of


def test_a_search_snippet_keeps_whole_words() -> None:
    text = (
        "The weather in Paris is sunny with a light breeze from the northwest, temperatures around "
        "21 degrees and no rain expected until the weekend."
    )
    snip = snippet_of(text, text.find("temperatures"), len("temperatures"))
    assert "temperatures" in snip
    words = set(text.replace(",", " ").replace(".", " ").split())
    for w in snip.strip("…").replace(",", " ").replace(".", " ").split():
        assert w in words, (w, snip)


@given(
    st.lists(
        st.sampled_from(["alpha", "beta", "gamma", "delta", "epsilon"]), min_size=1, max_size=80
    ),
    st.data(),
)
def test_a_snippet_always_holds_the_whole_match_and_whole_words(
    words: list[str], data: st.DataObject
) -> None:
    text = " ".join(words)
    i = data.draw(st.integers(0, len(words) - 1))
    at = len(" ".join(words[:i])) + (1 if i else 0)
    snip = snippet_of(text, at, len(words[i]))
    assert words[i] in snip
    assert all(
        w in {"alpha", "beta", "gamma", "delta", "epsilon"}
        for w in re.split(r"\s+", snip.strip("…"))
        if w
    )


def test_params_are_json_pairs_cut_whole() -> None:
    from inspector.widgets.dispatch import PARAMS_LIMIT, params_text

    line = params_text(
        {
            "stream_options": {"include_usage": True},
            "temperature": 0.2,
            "metadata": {"k": "v" * 500},
            "stop": None,
        }
    )
    assert "stream_options={\"include_usage\":true}" in line  # JSON, not {'include_usage': True}
    assert "temperature=0.2" in line and "stop=null" in line
    assert "metadata={\"k\":\"vvv" in line and "…" in line  # a long value shortened inside itself
    many = params_text({f"p{i}": "x" * 40 for i in range(30)})
    assert len(many) <= PARAMS_LIMIT + 20 and many.endswith("more)")
    assert all(re.fullmatch(r"p\d+=\"x+\"", pair) for pair in many.split(", ")[:-1])
