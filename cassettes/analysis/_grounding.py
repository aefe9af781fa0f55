"""What an answer asserts, and whether what it was given holds it: the spans of E.ungrounded_claim.

A claim is what the model tells its reader as fact: a URL given as a source (whole, parentheses
and all), a quote of three words or more that the answer attributes (something says, wrote or is
titled it; quotes paired in order), a date as a whole (an invented
date whose day and year both appear elsewhere is still invented), a number with its unit or sign
(``45 seconds``, ``$12.50``, ``4.8``), or a number of 100 or more. Never the model's own code
(fenced or inline), a query it says it searched for, a format string, nor a number it derives in
the same answer from grounded ones (a sum, a difference, a product, a ratio or a percentage).
Small bare integers (counts, enumerations) and years are no claims.

A number is read with its scale (``21 million``, ``3.5k``, ``$1.2bn``, ``4M``: 21,000,000 …), in
the answer and in the sources, and the sources' number words are read as numbers (``two
thousand``, ``twenty-one million``): ``21,000,000`` is grounded by ``21 million``, and the other
way round. A number the answer does not derive itself is still no claim when it is arithmetic on
the numbers the tools gave (:func:`_Operands`): a sum or difference of two of them, a sum of three,
the total of them all, or, written as a percentage (``%``, ``percent``) or a ratio (``times``,
``x``), their ratio or percentage change; the first :data:`_MAX_OPERANDS` numbers are combined, so
the work is bounded whatever the tools returned. Number words in the answer are not read.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from decimal import Decimal, InvalidOperation
from itertools import combinations

from ..lazy import pattern

__all__ = ["may_claim", "unsourced"]

#: Bounds: an answer's first characters read, and the numbers of it tried by arithmetic.
_MAX_ANSWER = 20_000
_MAX_NUMBERS = 40
#: The tools' numbers combined by :class:`_Operands` (pairs: 496; triples of the first 16: 560).
_MAX_OPERANDS = 32
_MAX_TRIPLES = 16

#: A URL up to whitespace, a quote or a markup bracket; a ``)`` is kept when it closes a ``(`` of
#: the URL itself (``…/Python_(programming_language)``), dropped when it closes a Markdown link.
URL = pattern(r"https?://[^\s<>\"'`\]\[{}|\\^]+")
#: Quotes, paired in order: a straight quote closes at the next straight one, a curly at ”.
QUOTE = pattern(r"\"([^\"\n]{1,300})\"|“([^“”\n]{1,300})”")
#: A quote is a claim when the answer attributes it: something says, writes or is titled it. A
#: quote of the model's own (a joke, a translation, a phrase it suggests) is none.
_ATTRIBUTED = pattern(
    r"\b(?:says?|said|saying|states?|stated|wrote|writes|written|reads?|quot(?:es?|ed)"
    r"|titled|entitled|called|named|according to|reports?|reported|mentions?|notes?)\W{0,3}$"
    r"|\b(?:says?|said|states?|wrote|writes|titled|entitled|called|named)\b[^.\n]{0,40}$",
    re.IGNORECASE,
)
#: Speech the model puts forward itself ("you could say", "so to say", "as they say"): its own
#: phrase, not a source's words.
_OWN_SAY = pattern(
    r"\b(?:could|might|would|can|may|should|shall|'d|let's|let us|so to|as they|as people)"
    r"\s+say\b[^.\n]{0,40}$",
    re.IGNORECASE,
)
#: A quote the model searched for or typed, not a fact it asserts.
_QUERY = pattern(
    r"\b(?:search(?:ed|ing)?(?: for)?|quer(?:y|ied)|look(?:ed|ing)? up|typed|googl(?:e|ed|ing)"
    r"|keywords?|prompt(?:ed)?)\b[^.\n]{0,30}$",
    re.IGNORECASE,
)
#: What a claim holds (:data:`URL`, :data:`QUOTE`, :data:`DATE` and :data:`NUMBER` each need one).
_CLAIM_STUFF = pattern(r"http|\"|“|\d")
_CODE = pattern(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)
NUMBER = pattern(
    r"(?<![\w.,/-])[$€£]?\d[\d,]*(?:\.\d+)?(?:%|(?P<suffix>[kK]|bn|mn|tn|[MB]))?(?![\w-]|[.,/:]\d)"
)
#: A scale word after a number (``21 million``); a suffix (``3.5k``, ``$1.2bn``, ``4M``) is
#: :data:`NUMBER`'s ``suffix`` (``m`` and ``b`` alone are metres and bytes, not read so).
_SCALE_WORD = pattern(r"[ \t\u00a0]?(thousand|million|billion|trillion)\b", re.IGNORECASE)
_SCALES = {
    "k": 3, "thousand": 3, "m": 6, "mn": 6, "million": 6,
    "b": 9, "bn": 9, "billion": 9, "tn": 12, "trillion": 12,
}  # fmt: skip
#: A number and its scale in the sources (a scale word, or a suffix as :data:`NUMBER` reads it).
_SCALED = pattern(
    r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)(?:[ \t\u00a0]?(thousand|million|billion|trillion)\b"
    r"|(k|bn|mn|tn|M|B)\b)",
    re.IGNORECASE,
)
_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_WORD_SCALES = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_ONE_WORD = "|".join(sorted([*_WORDS, *_TENS, "hundred", *_WORD_SCALES], key=len, reverse=True))
#: A run of number words (``two thousand``, ``twenty-one million``, ``three hundred and five``),
#: in a lower-cased text.
_NUMBER_WORDS = pattern(rf"\b(?:{_ONE_WORD})(?:(?:[ \t-]+|[ \t]+and[ \t]+)(?:{_ONE_WORD}))*\b")
#: A unit after a number makes it a claim however small (``45 seconds``, ``3 kg``).
_UNIT = pattern(
    r"\s?(?:seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?|ms"
    r"|kg|g|grams?|lbs?|pounds?|ounces?|oz|km|m|cm|mm|metres?|meters?|miles?|mph|km/h|feet|ft"
    r"|inches?|litres?|liters?|l|ml|watts?|w|kw|kwh|volts?|v|gb|mb|tb|kb|°[cf]|degrees?"
    r"|gallons?|dollars?|euros?|usd|eur|gbp|stars?|percent)\b",
    re.IGNORECASE,
)
#: A month's number by the first three letters of its name.
_MONTHS = {
    name: i + 1 for i, name in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())
}
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?" + (
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
#: A whole date: ISO (``2019-03-02``, a timestamp's date), ``March 2, 2019``, ``2 March 2019``.
DATE = pattern(
    r"\b(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)"
    rf"|\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b"
    rf"|\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b",
    re.IGNORECASE,
)

#: Each of :data:`DATE`'s forms has a year, four digits in a row: a text without them holds no
#: date. Found by scanning for a digit, much quicker than trying DATE's case-blind month names
#: and word boundaries at every position of a text (most texts have no date).
_FOUR_DIGITS = pattern(r"\d\d\d\d")


def _date(m: re.Match[str]) -> tuple[int, int, int] | None:
    g = m.groups()
    try:
        if g[0]:
            y, mo, d = int(g[0]), int(g[1]), int(g[2])
        elif g[3]:
            y, mo, d = int(g[5]), _MONTHS[g[3].lower().rstrip(".")[:3]], int(g[4])
        else:
            y, mo, d = int(g[8]), _MONTHS[g[7].lower().rstrip(".")[:3]], int(g[6])
    except (KeyError, ValueError):
        return None
    return (y, mo, d) if 1 <= mo <= 12 and 1 <= d <= 31 else None


def _digits(span: str) -> str:
    """A number's digits as compared: no sign, no separators, no trailing decimal zeros."""
    n = span.strip("$€£%").replace(",", "")
    return n.rstrip("0").rstrip(".") if "." in n else n


def _counts(span: str, unit: bool) -> bool:
    """A number that carries a fact: one with a unit or a sign, a decimal, or one of 100 or more
    that is not a year; not a small bare integer (a count, an item's number)."""
    n = _digits(span)
    if unit or span[0] in "$€£" or span.endswith("%") or "." in n:
        return True
    return n.isdigit() and int(n) >= 100 and not (n.startswith(("19", "20")) and len(n) == 4)


def _scaled(mantissa: str, exp: int) -> str | None:
    """A number written with a scale (``21`` million, ``3.5``k) as :func:`_digits` writes it
    (``21000000``, ``3500``); ``None`` when it is no number."""
    try:
        d = Decimal(mantissa.strip("$€£").replace(",", "")).scaleb(exp)
    except (InvalidOperation, ValueError):
        return None
    return _digits(format(d.normalize(), "f")) if d.is_finite() else None


def _word_numbers(low: str) -> set[str]:
    """The numbers a lower-cased text writes in words (``two thousand`` → ``2000``), as
    :func:`_digits` writes them. A unit after a unit starts another number (``one two``: 1, 2)."""
    out: set[str] = set()
    for m in _NUMBER_WORDS.finditer(low):
        total = current = 0
        last = ""
        for w in re.split(r"[ \t-]+", m.group(0)):
            if w == "and":
                continue
            if w in _WORD_SCALES:
                total += max(current, 1) * 10 ** _WORD_SCALES[w]
                current = 0
            elif w == "hundred":
                current = max(current, 1) * 100
            else:
                n = _WORDS.index(w) if w in _WORDS else 10 * (_TENS.index(w) + 2)
                if last in _WORDS or (last in _TENS and n >= 10):  # "one two": two numbers
                    out.add(str(total + current))
                    total = current = 0
                current += n
            last = w
        out.add(str(total + current))
    return out


def _source_numbers(low: str) -> set[str]:
    """Every number a lower-cased text holds, as :func:`_digits` writes them: in digits, with
    their scale (``21 million``: 21 and 21000000), and in words."""
    digits = {_digits(n) for n in re.findall(r"\d+(?:\.\d+)?", low.replace(",", ""))}
    for m in _SCALED.finditer(low):
        scaled = _scaled(m.group(1), _SCALES[(m.group(2) or m.group(3)).lower()])
        if scaled is not None:
            digits.add(scaled)
    if _WORD_HINT.search(low):
        digits |= _word_numbers(low)
    return digits


#: A text that may write a number in words (checked before :data:`_NUMBER_WORDS` is tried).
_WORD_HINT = pattern(
    r"(?:one|two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|trillion)\b"
)


def _sums(values: list[float]) -> list[float]:
    """Sums and differences of two of ``values``, sums of three of the first
    :data:`_MAX_TRIPLES`, and the total of them all."""
    out = [sum(values)] if len(values) > 2 else []
    for a, b in combinations(values, 2):
        out += (a + b, abs(a - b))
    out += (sum(t) for t in combinations(values[:_MAX_TRIPLES], 3))
    return out


class _Operands:
    """The numbers the tools gave (their first :data:`_MAX_OPERANDS`, dates left out) and what
    arithmetic on them makes, sorted for look-up: :func:`_sums` of the quantities among them (not
    the small bare integers :func:`_counts` takes for counts, which are summed only with whole
    numbers, to 100 or more); of any two, the ratios and percentages (share and change: 3 of 12
    is 25 %)."""

    def __init__(self, text: str) -> None:
        text = DATE.sub(" ", text) if _FOUR_DIGITS.search(text) else text
        values: list[float] = []
        quantities: list[float] = []
        for m in NUMBER.finditer(text):
            span = m.group(0).rstrip(",")
            suffix = m.group("suffix")
            word = None if suffix else _SCALE_WORD.match(text, m.end())
            x = _value(span.removesuffix(suffix) if suffix else span)
            if x is None or x in values:
                continue
            values.append(x)
            if suffix or word:
                values[-1] = x = (
                    x * 10.0 ** _SCALES[(suffix or (word.group(1) if word else "")).lower()]
                )
            if suffix or word or _counts(span, _UNIT.match(text, m.end()) is not None):
                quantities.append(x)
            if len(values) >= _MAX_OPERANDS:
                break
        # whole numbers (counts among them) summed alone, to a result no count is: 340 + 85
        # kettles are 425, but 2 + 3 days are chance
        whole = [x for x in values if x == int(x)]
        sums = _sums(quantities) + [s for s in _sums(whole) if s >= 100]
        ratios: list[float] = []
        shares: list[float] = []
        for a, b in combinations(values, 2):
            for p, q in ((a, b), (b, a)):
                if q:
                    ratios.append(p / q)
                    shares += (p / q * 100, abs(p - q) / abs(q) * 100)
        self.sums, self.ratios, self.shares = sorted(sums), sorted(ratios), sorted(shares)

    def make(self, x: float, exact: float, tol: float, kind: str) -> bool:
        """``x`` is a sum or difference of the tools' numbers (within ``exact``: to the cent), or,
        for ``kind`` ``percent`` or ``ratio``, one of their percentages or ratios (within ``tol``:
        rounded to the digits it is written with)."""
        pools = [(self.sums, exact)] + (
            [(self.shares, tol)]
            if kind == "percent"
            else [(self.ratios, tol)]
            if kind == "ratio"
            else []
        )
        for pool, tol in pools:
            i = bisect_left(pool, x - tol)
            if i < len(pool) and pool[i] <= x + tol:
                return True
        return False


#: What makes a number a percentage or a ratio (after it; ``%`` is part of the number).
_PERCENT_WORD = pattern(r"[ \t]?(?:percent|per cent)\b", re.IGNORECASE)
_RATIO_WORD = pattern(r"[ \t]?(?:times|x|fold)\b", re.IGNORECASE)


def _tolerance(mantissa: str, exp: int) -> float:
    """Half a unit of the last digit a number is written with (``19.75``: 0.005; ``21.3``
    million: 50,000): what rounding to it may have moved."""
    n = mantissa.strip("$€£%").replace(",", "")
    decimals = len(n.split(".", 1)[1]) if "." in n else 0
    return 0.5 * 10.0 ** (exp - decimals) + 1e-9


def _value(span: str) -> float | None:
    try:
        return float(span.strip("$€£%").replace(",", ""))
    except ValueError:
        return None


#: Unit conversions an answer makes, by the unit it gives (°F from °C and back, miles and km,
#: pounds and kg, feet and metres, gallons and litres).
def _fahrenheit(c: float) -> float:
    return c * 9 / 5 + 32


def _celsius(f: float) -> float:
    return (f - 32) * 5 / 9


_TEMPERATURE = (_fahrenheit, _celsius)
_CONVERSIONS: dict[str, tuple[float, ...]] = {
    "distance": (0.621371, 1 / 0.621371),
    "weight": (2.20462, 1 / 2.20462),
    "length": (3.28084, 1 / 3.28084),
    "volume": (0.264172, 1 / 0.264172),
}
_KIND = pattern(
    r"(?P<temperature>°[cf]|degrees?)|(?P<distance>miles?|mph|km|km/h)"
    r"|(?P<weight>kg|lbs?|pounds?)|(?P<length>feet|ft|m|metres?|meters?)"
    r"|(?P<volume>gallons?|l|litres?|liters?)",
    re.IGNORECASE,
)


def _converted(x: float, unit: str, given: list[float]) -> bool:
    """``x``, given in ``unit``, is one of ``given`` converted from the unit's other system,
    rounded; numbers under 10 are not tried (rounding would ground almost any)."""
    m = _KIND.fullmatch(unit.strip())
    if m is None or abs(x) < 10:
        return False
    kind = m.lastgroup or ""
    ys = (
        [f(k) for k in given if abs(k) >= 5 for f in _TEMPERATURE]
        if kind == "temperature"
        else [k * r for k in given if abs(k) >= 5 for r in _CONVERSIONS.get(kind, ())]
    )
    return any(abs(y - x) <= 0.5 + abs(x) * 0.01 for y in ys)


def _derived(x: float, known: list[float]) -> bool:
    """``x`` is a sum, difference, product, ratio or percentage of two known numbers (the
    answer's own), or the total of them all (to the cent)."""
    if known and abs(sum(known) - x) < 0.005:
        return True
    for a, b in combinations(known[:_MAX_NUMBERS], 2):
        for y in (a + b, a - b, b - a, a * b, a / b if b else None, b / a if a else None):
            if y is not None and (abs(y - x) < 0.005 or abs(y * 100 - x) < 0.05):
                return True
    return False


def _url_whole(url: str) -> str:
    """The URL without the punctuation that ends a sentence or a Markdown link around it."""
    while url:
        if url[-1] in ".,;:!?*_":
            url = url[:-1]
        elif url[-1] == ")" and url.count(")") > url.count("("):
            url = url[:-1]
        else:
            break
    return url


def _claims_text(answer: str) -> str:
    """The answer as read for claims: its code (fenced or inline) blanked."""
    return _CODE.sub(" ", answer[:_MAX_ANSWER])


def may_claim(answer: str) -> bool:
    """The answer holds what a claim is made of: a URL's ``http``, a quote mark or a digit (every
    date and number has one); without any, :func:`unsourced` finds none whatever it was given,
    and the sources (the whole history) need not be read."""
    return _CLAIM_STUFF.search(_claims_text(answer)) is not None


class _Sources:
    """What the claims are looked for in: the sources' text (whitespace folded, lower case), the
    numbers it writes, and its dates; the tools' numbers the answer's arithmetic may combine,
    read once when first asked (``operands``: the tools' results, newest first)."""

    def __init__(self, sources: str, operands: str | None) -> None:
        self.low = " ".join(sources.split()).lower()
        self.digits = _source_numbers(self.low)
        self.given = [float(n) for n in list(self.digits)[: 4 * _MAX_NUMBERS] if n and len(n) < 16]
        self.dates = (
            {d for m in DATE.finditer(self.low) if (d := _date(m)) is not None}
            if _FOUR_DIGITS.search(self.low)
            else set()
        )
        self._operands_text = sources if operands is None else operands
        self._tools: _Operands | None = None

    def tools(self) -> _Operands:
        self._tools = self._tools or _Operands(self._operands_text)
        return self._tools


def _unsourced_urls(text: str, src: _Sources, out: list[str]) -> str:
    """The URLs of ``text`` not in the sources (added to ``out``); ``text`` without them."""

    def url(m: re.Match[str]) -> str:
        whole = _url_whole(m.group(0))
        if whole.lower().rstrip("/") not in src.low:
            out.append(whole)
        return " " + m.group(0)[len(whole) :]

    return URL.sub(url, text)


def _quote_claimed(text: str, q: re.Match[str], low: str) -> bool:
    """Quote ``q`` is a claim no source carries: three words or more, attributed to someone
    (not a query, not the answer's own words, not a template), not in the sources."""
    inner = q.group(1) or q.group(2) or ""
    words = " ".join(inner.split()).lower()
    before = text[max(0, q.start() - 60) : q.start()]
    return (
        len(words) >= 12
        and len(words.split()) >= 3
        and _ATTRIBUTED.search(before) is not None
        and not _QUERY.search(before)
        and not _OWN_SAY.search(before)
        and not re.search(r"\{[\w.:]*\}|%[sd]", inner)
        and words.strip(" .,;:!?") not in low
    )


def _unsourced_quotes(text: str, src: _Sources, out: list[str]) -> str:
    """The quotes of ``text`` no source carries (added to ``out``); ``text`` without quotes."""
    kept: list[str] = []
    last = 0
    for q in QUOTE.finditer(text):
        kept.append(text[last : q.start()])
        last = q.end()
        if _quote_claimed(text, q, src.low):
            out.append(q.group(0))
    return " ".join([*kept, text[last:]])


def _unsourced_dates(text: str, src: _Sources, out: list[str]) -> str:
    """The dates of ``text`` not among the sources' (added to ``out``); ``text`` without them."""

    def date(m: re.Match[str]) -> str:
        d = _date(m)
        if d is not None and d not in src.dates:
            out.append(m.group(0))
        return " "

    return DATE.sub(date, text) if _FOUR_DIGITS.search(text) else text


class _Number:
    """One number of the answer as read: its span, scale (``k``, ``million``), unit and value."""

    def __init__(self, text: str, m: re.Match[str]) -> None:
        self.span = m.group(0).rstrip(",")
        suffix = m.group("suffix")
        self.word = None if suffix else _SCALE_WORD.match(text, m.end())
        scale = suffix or (self.word.group(1) if self.word else "")
        self.exp = _SCALES[scale.lower()] if scale else 0
        self.mantissa = self.span.removesuffix(suffix) if suffix else self.span
        self.unit = None if self.exp else _UNIT.match(text, m.end())
        x = _value(self.mantissa)
        self.x = x * 10.0**self.exp if x is not None else None
        self.end = m.end()

    def said(self) -> str:
        out = self.span + (self.word.group(0) if self.word else "")
        return out + (self.unit.group(0) if self.unit and not self.span.endswith("%") else "")


def _number_given(n: _Number, src: _Sources, known: list[float]) -> bool:
    """The evidence rows for a number, in order: written so in the sources (or scaled, or with a
    decimal comma), too small to claim anything, derived from the answer's own numbers, a unit
    conversion of a source's number."""
    digits = src.digits
    # a decimal comma (``1,7``) is the number written otherwise, not seventeen
    comma = re.fullmatch(r"[$€£]?\d+,\d{1,2}%?", n.span)
    return (
        _digits(n.mantissa) in digits
        or (n.exp > 0 and _scaled(n.mantissa, n.exp) in digits)
        or (comma is not None and _digits(n.span.replace(",", ".")) in digits)
        or not (n.exp > 0 or _counts(n.span, n.unit is not None))
        or (n.x is not None and _derived(n.x, known))
        or (n.x is not None and n.unit is not None and _converted(n.x, n.unit.group(0), src.given))
    )


def _computed(n: _Number, text: str, src: _Sources) -> bool:
    """Arithmetic on the tools' numbers makes ``n`` (the operands read once, if asked)."""
    assert n.x is not None
    kind = (
        "percent"
        if n.span.endswith("%") or _PERCENT_WORD.match(text, n.end)
        else "ratio"
        if _RATIO_WORD.match(text, n.end)
        else ""
    )
    return src.tools().make(n.x, 0.005 * 10.0**n.exp, _tolerance(n.mantissa, n.exp), kind)


def _unsourced_numbers(text: str, src: _Sources, out: list[str]) -> None:
    """The numbers of ``text`` nothing grounds (added to ``out``). The operands of the answer's
    own arithmetic: the grounded numbers it gave so far, its small counts, and what it derived
    from them."""
    known: list[float] = []
    for m in NUMBER.finditer(text):
        n = _Number(text, m)
        ok = _number_given(n, src, known)
        if not ok and n.x is not None:
            ok = _computed(n, text, src)
        if n.x is not None and ok and len(known) < _MAX_NUMBERS:
            known.append(n.x)
        if not ok:
            out.append(n.said())


def unsourced(answer: str, sources: str, operands: str | None = None) -> list[str]:
    """The claims of ``answer`` (URLs, quotes, dates, numbers) found nowhere in ``sources``;
    ``operands`` is the text whose numbers the answer's arithmetic may combine (the tools'
    results, newest first; ``sources`` when not given). Each kind of claim is read in turn and
    taken out of the text before the next is read."""
    src = _Sources(sources, operands)
    out: list[str] = []
    text = _claims_text(answer)
    for read in (_unsourced_urls, _unsourced_quotes, _unsourced_dates):
        text = read(text, src, out)
    _unsourced_numbers(text, src, out)
    return list(dict.fromkeys(out))
