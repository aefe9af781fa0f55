"""E.ungrounded_claim judges claims, not strings (issue 70 item 1): what each rule of
:mod:`cassettes.analysis._grounding` counts and leaves, each with the string the old span search
got wrong (the failures people labelled: quoted search queries, code format strings, URLs cut at
``)``, a closing quote paired with the next opening one, derived numbers, an invented date whose
parts appear elsewhere)."""

from __future__ import annotations

from scenarios import AgentScript, Call

from looptap.cassettes.analysis import unsourced

ORDER = (
    '{"order_id": "W1", "placed": "2019-03-14", "items": 2, "price": 12.50, "updated": '
    '"2019-02-01", "W2": {"price": 7.25}, "manual": "Descale it every month or so."}'
)


def test_a_date_is_judged_whole() -> None:
    """The day (2) and the year (2019) both appear in the order: the date does not."""
    assert unsourced("It shipped on March 2, 2019.", ORDER) == ["March 2, 2019"]
    assert unsourced("It was placed on 14 March 2019 and on 2019-03-14.", ORDER) == []


def test_a_date_in_any_script_s_digits_is_read_whatever_the_sources_hold() -> None:
    """Dates are looked for only where four digits stand in a row (each form has a year): in
    any script's digits, as the date pattern reads them, in the answer as in the sources; and a
    source without a year grounds no date."""
    eastern = "\u0662\u0660\u0661\u0669-\u0660\u0663-\u0661\u0664"  # 2019-03-14, Arabic-Indic
    assert unsourced(f"It was placed on {eastern}.", ORDER) == []
    assert unsourced("It was placed on 2019-03-14.", f"placed {eastern}") == []
    assert unsourced("It shipped on 2 March 2019.", "shipped in March, 2 items") == ["2 March 2019"]
    assert unsourced(f"Placed {eastern}, shipped March 2, 2019.", "no year here") == [
        eastern,
        "March 2, 2019",
    ]


def test_numbers_derived_in_the_answer_are_grounded() -> None:
    answer = "W1 at $12.50 and W2 at $7.25 come to $19.75; 2 of W1 cost $25, 3 cost $37.5."
    assert unsourced(answer, ORDER) == []
    assert unsourced("W1 at $12.50 and W2 at $7.25 come to $21.75.", ORDER) == ["$21.75"]


def test_a_number_with_its_unit_is_a_claim() -> None:
    assert unsourced("It arrives in 5 days and weighs 3 kg.", ORDER) == ["5 days", "3 kg"]
    assert unsourced("You have 2 items; 5 of them… no, 2.", ORDER) == []


def test_quotes_are_paired_in_order() -> None:
    """Was: '" and the manual says "' read as a quote (a closing quote paired with the next
    opening one)."""
    answer = 'The status is "ok" and the manual says "Descale it every month or so."'
    assert unsourced(answer, ORDER) == []
    assert unsourced('It says "descale it every single day".', ORDER) == [
        '"descale it every single day"'
    ]


def test_a_search_query_code_and_format_strings_are_no_claims() -> None:
    answer = (
        'I searched for "best electric kettle under fifty dollars" and typed "kettle reviews '
        'uk 2024" too. Use `requests.get("https://api.kettles.example/v1/items")`, or:\n'
        '```python\nprint(f"{name} costs {price:.2f} dollars, 1,299 in stock")\n```\n'
        'The template "{name} costs {price} today" fills in the rest.'
    )
    assert unsourced(answer, ORDER) == []


def test_a_url_is_read_whole() -> None:
    """Was: cut at ``(``/``)``, so an invented URL was listed cut, and a Markdown link's ``)``
    kept."""
    answer = "See [the article](https://en.example.org/wiki/Kettle_(appliance)), and https://k.example/a."
    assert unsourced(answer, ORDER) == [
        "https://en.example.org/wiki/Kettle_(appliance)",
        "https://k.example/a",
    ]
    src = ORDER + " https://en.example.org/wiki/Kettle_(appliance)"
    assert unsourced("Source: https://en.example.org/wiki/Kettle_(appliance).", src) == []


def test_a_quote_of_the_models_own_is_no_claim() -> None:
    """A joke, a translation, a phrase it suggests (the corpus' answers): a quote is a claim only
    where the answer attributes it to something."""
    assert unsourced('Version 0.32a0: have a "0.32a good time" with it!', ORDER) == []
    assert unsourced('In French: "Bonjour, comment allez-vous?"', ORDER) == []
    assert unsourced('The review is titled "Best kettle of the decade".', ORDER) == [
        '"Best kettle of the decade"'
    ]


def test_a_phrase_the_model_says_itself_is_no_claim() -> None:
    """llm-anthropic's corpus answer (the last false ``E.ungrounded_claim`` there): "I guess you
    could say" puts the model's own joke forward; what a review says is still a claim."""
    joke = (
        "Looks like this version is still in alpha testing... I guess you could say it's going "
        'through a "0.32a good time" before becoming stable!'
    )
    assert unsourced(joke, ORDER) == []
    assert unsourced('As they say, "a watched pot never boils".', ORDER) == []
    assert unsourced('One review says it is going through "a really good time".', ORDER) == [
        '"a really good time"'
    ]


def test_a_unit_converted_from_a_source_is_grounded() -> None:
    """The corpus' weather answers: "Sunny, 22C in Paris" answered as 72°F."""
    assert unsourced("It is sunny and 72°F (about 22°C) in Paris.", "Sunny, 22C in Paris") == []
    assert unsourced("It is sunny and 80°F in Paris.", "Sunny, 22C in Paris") == ["80°F"]


def _read_file(content: object) -> list[tuple[str, str]]:
    """A tool returns ``content`` (Anthropic blocks) and the model quotes a document."""
    s = AgentScript("anthropic", system="You describe files.", tools=())
    s.user("Describe the file.")
    s.reply(calls=[Call("get_file", {}, id="toolu_1")])
    s.history.append(
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": content}
        ]}
    )  # fmt: skip
    s.reply('The document says "This is a simple PDF file."')
    return [(f.code, f.severity) for f in s.analyse().findings if f.code == "E.ungrounded_claim"]


def test_an_answer_resting_on_a_document_is_not_judged() -> None:
    """The corpus' multimodal runs: the model quotes a PDF a tool returned, which looptap cannot
    read (the normaliser describes it: ``[document: application/pdf]``), so it cannot judge."""
    pdf = {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjMK"}
    assert _read_file([{"type": "document", "source": pdf}]) == []
    # twin: a text result that does not hold the quote
    assert _read_file("A plain page.") == [("E.ungrounded_claim", "info")]
