"""What an answer asserts, and whether what it was given holds it: the spans of E.ungrounded_claim.

A claim is what the model tells its reader as fact: a URL given as a source (whole, parentheses
and all), a quote of three words or more that the answer attributes (something says, wrote or is
titled it; quotes paired in order), a date as a whole (an invented
date whose day and year both appear elsewhere is still invented), a number with its unit or sign
(``45 seconds``, ``$12.50``, ``4.8``), or a number of 100 or more. Never the model's own code
(fenced or inline), a query it says it searched for, a format string, nor a number it derives in
the same answer from grounded ones (a sum, a difference, a product, a ratio or a percentage).
Small bare integers (counts, enumerations) and years are no claims.
"""

from __future__ import annotations

import re
from itertools import combinations

from ..lazy import pattern

__all__ = ["may_claim", "unsourced"]

#: Bounds: an answer's first characters read, and the numbers of it tried by arithmetic.
_MAX_ANSWER = 20_000
_MAX_NUMBERS = 40

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
NUMBER = pattern(r"(?<![\w.,/-])[$€£]?\d[\d,]*(?:\.\d+)?%?(?![\w-]|[.,/:]\d)")
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


def unsourced(answer: str, sources: str) -> list[str]:
    """The claims of ``answer`` (URLs, quotes, dates, numbers) found nowhere in ``sources``."""
    low = " ".join(sources.split()).lower()
    digits = {_digits(n) for n in re.findall(r"\d+(?:\.\d+)?", low.replace(",", ""))}
    given = [float(n) for n in list(digits)[: 4 * _MAX_NUMBERS] if n and len(n) < 16]
    dates = (
        {d for m in DATE.finditer(low) if (d := _date(m)) is not None}
        if _FOUR_DIGITS.search(low)
        else set()
    )
    out: list[str] = []
    text = _claims_text(answer)

    def url(m: re.Match[str]) -> str:
        whole = _url_whole(m.group(0))
        if whole.lower().rstrip("/") not in low:
            out.append(whole)
        return " " + m.group(0)[len(whole) :]

    text = URL.sub(url, text)
    kept: list[str] = []
    last = 0
    for q in QUOTE.finditer(text):
        kept.append(text[last : q.start()])
        last = q.end()
        inner = q.group(1) or q.group(2) or ""
        words = " ".join(inner.split()).lower()
        if (
            len(words) >= 12
            and len(words.split()) >= 3
            and _ATTRIBUTED.search(text[max(0, q.start() - 60) : q.start()])
            and not _QUERY.search(text[max(0, q.start() - 60) : q.start()])
            and not _OWN_SAY.search(text[max(0, q.start() - 60) : q.start()])
            and not re.search(r"\{[\w.:]*\}|%[sd]", inner)
            and words.strip(" .,;:!?") not in low
        ):
            out.append(q.group(0))
    text = " ".join([*kept, text[last:]])

    def date(m: re.Match[str]) -> str:
        d = _date(m)
        if d is not None and d not in dates:
            out.append(m.group(0))
        return " "

    if _FOUR_DIGITS.search(text):
        text = DATE.sub(date, text)
    # the operands of the answer's own arithmetic: the grounded numbers it gave so far, its small
    # counts, and what it derived from them
    known: list[float] = []
    for m in NUMBER.finditer(text):
        span = m.group(0).rstrip(",")
        unit = _UNIT.match(text, m.end())
        x = _value(span)
        # a decimal comma (``1,7``) is the number written otherwise, not seventeen
        comma = re.fullmatch(r"[$€£]?\d+,\d{1,2}%?", span)
        ok = (
            _digits(span) in digits
            or (comma is not None and _digits(span.replace(",", ".")) in digits)
            or not _counts(span, unit is not None)
            or (x is not None and _derived(x, known))
            or (x is not None and unit is not None and _converted(x, unit.group(0), given))
        )
        if x is not None and ok and len(known) < _MAX_NUMBERS:
            known.append(x)
        if not ok:
            out.append(span + (unit.group(0) if unit and not span.endswith("%") else ""))
    return list(dict.fromkeys(out))
