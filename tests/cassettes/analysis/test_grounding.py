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


# --- issue 83 item 5d: numbers with scales or in words, and arithmetic on the tools' numbers ----


def test_a_number_is_read_with_its_scale_in_the_answer_and_in_the_sources() -> None:
    """Was: "21,000,000" flagged when the source says "21 million" (and "3.5k", "$1.2bn", "4M"
    were not read as numbers at all)."""
    pairs = [
        ("It has 21,000,000 users.", "users: 21 million"),
        ("It has 21 million users.", '{"users": 21000000}'),
        ("It has 21.5 million users.", '{"users": 21500000}'),
        ("The fund holds $1.2bn.", '{"assets_usd": 1200000000}'),
        ("The fund holds $1,200,000,000.", "Assets: $1.2bn"),
        ("The repository has 3,500 stars.", "stars: 3.5k"),
        ("The repository has 3.5k stars.", '{"stars": 3500}'),
        ("The model has 4,000,000 parameters.", "a 4M-parameter model: 4M parameters"),
        ("About 7 billion people.", "world population: 7,000,000,000"),
    ]
    for answer, source in pairs:
        assert unsourced(answer, source) == [], (answer, source)
    # twins: another number, whichever way it is written, is still a claim
    assert unsourced("It has 22,000,000 users.", "users: 21 million") == ["22,000,000"]
    assert unsourced("It has 22 million users.", '{"users": 21000000}') == ["22 million"]
    assert unsourced("The repository has 4.5k stars.", '{"stars": 3500}') == ["4.5k"]
    assert unsourced("The fund holds $1.3bn.", '{"assets_usd": 1200000000}') == ["$1.3bn"]


def test_the_sources_number_words_are_numbers() -> None:
    pairs = [
        ("It costs $2,000.", "It costs two thousand dollars."),
        ("The city has 21,000,000 people.", "a city of twenty-one million people"),
        ("The order holds 305 items.", "three hundred and five items"),
        ("It arrives in 5 days.", "Delivery takes five days."),
        ("The hall seats 1,200.", "seats one thousand two hundred"),
    ]
    for answer, source in pairs:
        assert unsourced(answer, source) == [], (answer, source)
    assert unsourced("It costs $2,500.", "It costs two thousand dollars.") == ["$2,500"]
    assert unsourced("It arrives in 6 days.", "Delivery takes five days.") == ["6 days"]


PRICES = '{"kettle_a": {"price": 12.99, "stock": 340}, "kettle_b": {"price": 8.49, "stock": 85}}'


def test_arithmetic_on_the_tools_numbers_is_no_claim() -> None:
    """Was: "$4.50" flagged (the difference of two prices the tools gave, the answer not
    repeating them)."""
    for answer in (
        "Kettle B is $4.50 cheaper.",  # a difference
        "Both together cost $21.48.",  # a sum
        "Kettle B costs 65.4% of kettle A.",  # a share, rounded as written
        "Kettle A costs 53% more than kettle B.",  # a change
        "Kettle A has 4 times the stock of kettle B.",  # a ratio, rounded as written
        "There are 425 kettles in stock.",  # a sum of two quantities
    ):
        assert unsourced(answer, PRICES, PRICES) == [], answer
    # twins: arithmetic that the numbers do not give
    assert unsourced("Kettle B is $5.50 cheaper.", PRICES, PRICES) == ["$5.50"]
    assert unsourced("Both together cost $22.48.", PRICES, PRICES) == ["$22.48"]
    assert unsourced("Kettle A costs 71% more than kettle B.", PRICES, PRICES) == ["71%"]
    assert unsourced("There are 430 kettles in stock.", PRICES, PRICES) == ["430"]


def test_a_count_is_not_added_to_the_quantities() -> None:
    """A small bare integer (a count, an id) is no operand of a sum: 2 + 12.50 + 7.25 = 21.75 is
    chance, not the answer's arithmetic; it is one of a share (3 of 12 is 25 %)."""
    assert unsourced("W1 and W2 come to $21.75.", ORDER, ORDER) == ["$21.75"]
    assert unsourced("3 of the 12 runs failed (25%).", '{"failed": 3, "runs": 12}') == []


def test_the_arithmetic_is_bounded_whatever_the_tools_returned() -> None:
    """A result of 20,000 numbers: only the first numbers are combined (pairs of 32, triples of
    16), so the sum of two numbers far down the list is not found, and the work stays small."""
    many = " ".join(f"{100 + i}.25" for i in range(20_000))
    assert unsourced("The first two add up to 201.50.", many, many) == []
    assert unsourced("Two of them add up to 39,500.50.", many, many) == ["39,500.50"]


def test_the_tools_numbers_are_combined_in_a_real_answer() -> None:
    """Through the analysis: the tools gave two prices, the answer gives their difference."""
    s = AgentScript("openai_chat", system="You compare kettles.", tools=())
    s.user("Which kettle is cheaper, and by how much?")
    s.reply(calls=[Call("get_prices", {}, id="call_1")])
    s.results(PRICES)
    s.reply("Kettle B is cheaper, by $4.50 (about 35%), and 21 million people own one.")
    found = [f for f in s.analyse().findings if f.code == "E.ungrounded_claim"]
    assert [f.details["spans"] for f in found] == [["21 million"]]
