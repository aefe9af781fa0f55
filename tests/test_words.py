"""What the inspector and search show of long values: whole words, whole pairs, JSON not Python."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from looptap.cassettes.views.search import snippet_of


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
    from looptap.inspector.widgets import PARAMS_LIMIT, params_text

    line = params_text(
        {
            "stream_options": {"include_usage": True},
            "temperature": 0.2,
            "metadata": {"k": "v" * 500},
            "stop": None,
        }
    )
    assert 'stream_options={"include_usage":true}' in line  # JSON, not {'include_usage': True}
    assert "temperature=0.2" in line and "stop=null" in line
    assert 'metadata={"k":"vvv' in line and "…" in line  # a long value shortened inside itself
    many = params_text({f"p{i}": "x" * 40 for i in range(30)})
    assert len(many) <= PARAMS_LIMIT + 20 and many.endswith("more)")
    assert all(re.fullmatch(r"p\d+=\"x+\"", pair) for pair in many.split(", ")[:-1])


#: Count nouns a number is written before ("1 turns" is the mistake this guards against).
_NOUNS = (
    "round trips|turns|conversations|findings|messages|calls|errors|warnings|requests|spans|"
    "entries|samples|branches|items|keys|characters|chars|lines|tokens|tools|results|matches|"
    "divergences|differences|runs|records|parts"
)
#: ``{n} nouns`` where ``n`` is never 1: a length beyond a limit (a clipped text, a secret), a count
#: of at least two by construction. Anything else goes through ``cassettes.hints.count``.
_NEVER_ONE = {
    "len(secret)",  # a secret pattern matches 8 characters or more
    "len(str(v))",
    "len(m[k])",
    "items:,",  # past MAX_TOTAL_ITEMS
    "limit:,",
    "len(text):,",  # printed only when cut: longer than the limit
    "len(line):,",
    "len(target):,",
    "len(s)",
    "prev_len",  # a history shortened from prev_len messages: at least 2
    "link.ambiguous",  # more than one candidate conversation
    "rec.addon.handoff.recorded",  # the recorder's flush line, parsed by the pytest plugin
}


def test_a_count_agrees_with_its_noun() -> None:
    """Issue 54 ("1 conversations" on the HTML page): no f-string of the product writes a number
    before a plural noun itself, nor does the HTML page's script (it has ``count()``)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found = []
    for path in sorted([*root.glob("cassettes/**/*.py"), *root.glob("inspector/**/*.py"),
                        *root.glob("proxy/**/*.py")]):  # fmt: skip
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(r"\{([^{}]+)\} (?:" + _NOUNS + r")\b", line):
                expr = m.group(1)
                if expr in _NEVER_ONE or re.search(r"\b[A-Z][A-Z_]{2,}\b", expr):
                    continue
                found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    js = (root / "cassettes/views/report_assets/page.js").read_text()
    for n, line in enumerate(js.splitlines(), 1):
        # (``in → out tokens`` counts two numbers: left as it is)
        if re.search(r"\+ \"[ (]*(?:" + _NOUNS + r")\b", line) and "→" not in line:
            found.append(f"page.js:{n}: {line.strip()}")
    assert not found, "\n".join(found)
