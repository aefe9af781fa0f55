"""Credential formats the gitleaks ruleset finds only beside its service's name, or not at all, and
the files and command lines credentials are written in (docs/redaction.md, "Values").

Each format is its service's own documented shape, found anywhere (a JSON value under a neutral
key, the second item of a list, a ``text/plain`` log line), as :data:`LOOPTAP_RULES` of
:mod:`cassettes.recording._detector` are; gitleaks' rules for these services need the service's
name within a few characters (``mailgun … key-…``), which tool traffic seldom writes.

The files and command lines (:data:`PLACE_RULES`): a PEM private key with or without its END line
(a ``cat`` of a partial key), ``.netrc``'s ``password``, ``.pgpass`` lines, ``curl -u user:pass``,
``mysql -p<password>``, ``--password VALUE`` / ``--token VALUE`` (the ``=`` forms are
``credential by name``), in a command line as typed, inside an ``sh -c`` string, or in a
process record's argv (a JSON list: items are read as the command line they make).
"""

from __future__ import annotations

#: (id, regex, keywords, entropy floor, secret group), as ``LOOPTAP_RULES``. Sources: Airtable's
#: "Personal access tokens" (``pat`` + 14 + ``.`` + 64 hex), Mailgun's API keys (``key-`` + 32
#: hex), Notion's integration secrets (``secret_`` + 43, ``ntn_`` since 2024), Discord's bot
#: tokens (base64 of the bot's id, ``.``, 6, ``.``, 27+), Telegram's Bot API (``<id>:AA…``, 35
#: characters after the colon), Linear (``lin_api_``), Sentry (``sntrys_``, ``sntryu_``), Doppler
#: (``dp.st.``, ``dp.sa.``, ``dp.ct.``), Resend (``re_``), Mapbox (``sk.eyJ``), Netlify (``nfp_``),
#: Supabase (``sbp_``), Vercel (``vercel_``), Heroku (``HRKU-``), Postman (``PMAK-``), Asana PATs
#: (``2/<id>/<id>:<32 hex>``), Cloudflare origin CA keys (``v1.0-``), Scaleway (``SCW``), Figma
#: (``figd_``), Atlassian (``ATATT3``), DigitalOcean (``dop_v1_``, ``doo_v1_``, ``dor_v1_``).
SERVICE_RULES: tuple[tuple[str, str, tuple[str, ...], float, int], ...] = (
    (
        "airtable token",
        r"pat(?<![A-Za-z0-9_]pat)[A-Za-z0-9]{14}\.[a-f0-9]{64}(?![a-f0-9])",
        ("pat",),
        0.0,
        0,
    ),
    ("mailgun key", r"key-(?<![A-Za-z0-9_-]key-)[0-9a-f]{32}(?![A-Za-z0-9])", ("key-",), 3.0, 0),
    (
        "notion token",
        r"ntn_(?<![A-Za-z0-9_]ntn_)[A-Za-z0-9]{40,50}(?![A-Za-z0-9])",
        ("ntn_",),
        3.5,
        0,
    ),
    (
        "notion token",
        r"secret_(?<![A-Za-z0-9_]secret_)([A-Za-z0-9]{43})(?![A-Za-z0-9_])",
        ("secret_",),
        4.0,
        0,
    ),
    (
        "discord bot token",
        r"(?<![A-Za-z0-9_.-])[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}"
        r"(?![A-Za-z0-9_.-])",
        (),
        3.5,
        0,
    ),
    (
        "telegram bot token",
        r"(?:(?<=/bot)|(?<![A-Za-z0-9_:]))\d{6,12}:AA[A-Za-z0-9_-]{30,36}(?![A-Za-z0-9_-])",
        (":aa",),
        3.0,
        0,
    ),
    ("linear key", r"lin_(?:api|oauth)_[A-Za-z0-9]{40}(?![A-Za-z0-9])", ("lin_",), 3.0, 0),
    ("sentry token", r"sntry[su]_[A-Za-z0-9+/=_-]{40,}", ("sntry",), 3.0, 0),
    ("doppler token", r"dp\.(?:st|sa|ct|pt|scim|audit)\.[A-Za-z0-9_.-]{40,}", ("dp.",), 3.0, 0),
    (
        "resend key",
        r"re_(?<![A-Za-z0-9_]re_)[A-Za-z0-9]{8}_[A-Za-z0-9]{24}(?![A-Za-z0-9])",
        ("re_",),
        3.0,
        0,
    ),
    ("mapbox secret token", r"sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}", ("sk.eyj",), 3.0, 0),
    (
        "netlify token",
        r"nfp_(?<![A-Za-z0-9_]nfp_)[A-Za-z0-9]{36,40}(?![A-Za-z0-9])",
        ("nfp_",),
        3.0,
        0,
    ),
    ("supabase token", r"sbp_(?<![A-Za-z0-9_]sbp_)[a-f0-9]{40}(?![A-Za-z0-9])", ("sbp_",), 3.0, 0),
    (
        "vercel token",
        r"vercel_(?<![A-Za-z0-9_]vercel_)[A-Za-z0-9]{24,}(?![A-Za-z0-9])",
        ("vercel_",),
        3.0,
        0,
    ),
    (
        "heroku key",
        r"HRKU-(?<![A-Za-z0-9_-]HRKU-)[A-Za-z0-9_-]{30,60}(?![A-Za-z0-9_-])",
        ("hrku-",),
        3.0,
        0,
    ),
    ("postman key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", ("pmak-",), 3.0, 0),
    (
        "asana token",
        r"(?<![\w/])[0-2]/\d{10,20}/\d{10,20}:[a-f0-9]{32}(?![a-f0-9])",
        (":",),
        3.0,
        0,
    ),
    ("cloudflare origin ca key", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}", ("v1.0-",), 3.0, 0),
    ("figma token", r"figd_[A-Za-z0-9_-]{40}", ("figd_",), 3.0, 0),
    ("atlassian token", r"ATATT3[A-Za-z0-9_=-]{180,}", ("atatt3",), 3.0, 0),
    ("digitalocean token", r"do[opr]_v1_[a-f0-9]{64}", ("_v1_",), 3.0, 0),
)

#: Cheap pre-checks, by rule id, for the rules no keyword gates (or only one that most text
#: holds, ``:``): the rule runs only on a text this regex finds something in. Each starts with a
#: literal, which Python's regex engine scans for alone, and each is a part of every match of its
#: rule's regex, so recall is unchanged (tests/cassettes/test_values_by_format.py). On the
#: corpus's 1,830 exchanges these rules had cost as much as every other new rule together.
PREFILTERS: dict[str, str] = {
    "discord bot token": r"\.[A-Za-z0-9_-]{6}\.",  # (its second and third parts' dots)
    "asana token": r"/\d{10,20}:",  # (its second id and the colon after it)
    ".pgpass line": r":(?:\d{1,5}|\*):",  # (the port between its colons)
    ".netrc password": r"(?i)password[ \t]",  # (its keywords, machine and default, are common)
}

#: The rules whose pre-check (:data:`PREFILTERS`) finds a match in a text where it finds one in
#: the text with one level of JSON's escapes read (``seal``'s levels: characters taken out, each
#: a backslash or a space that a backslash, a space, a quote or a slash follows, none other
#: changed: :meth:`~cassettes.recording._detector.Detector.unescaped`): each asserts nothing of
#: what stands around its match, and its matches hold no backslash nor space, and no quote nor
#: slash but as their first character, so none taken out stands in one (it stood before one
#: of those four) and a match in either is one in the other. Its answer for a text is its answer
#: for every level (:class:`~cassettes.recording._detector.Keywords`): ``.netrc``'s holds a
#: space.
LEVEL_FREE = frozenset({"discord bot token", "asana token", ".pgpass line"})

#: The rules whose match begins where a line does and whose pre-check's hit follows that start
#: with no newline or backslash between (:class:`~cassettes.recording._detector.LineRule`: tried
#: only at that start): a ``.pgpass`` line's host holds neither, then its ``:port:``.
LINE_RULES = frozenset({".pgpass line"})

#: A separator between a command's words as a command line or a process record's JSON argv
#: writes it: spaces, or ``", "`` between two items of a JSON list.
_SEP = r"""(?:[ \t]+|["']?\s*,\s*["']|["'][ \t]+["']?|[ \t]+["'])"""
#: A word of a command line (or of an argv item), up to a quote, a space, a JSON escape.
_WORD = r"""[^\s"'\\,]"""

#: Credentials by where they stand in a file or a command line: (id, regex, keywords, entropy,
#: group).
PLACE_RULES: tuple[tuple[str, str, tuple[str, ...], float, int], ...] = (
    (
        # with or without its END line (a partial key cat'ed): the base64 lines after BEGIN, up
        # to END or the first character that is none of a PEM body's (a JSON escape's \n is)
        "private key",
        r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
        r"((?:\\[nr]|[\sA-Za-z0-9+/=:,.-]){16,}?)"
        r"(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
        r"|(?!\\[nr]|[\sA-Za-z0-9+/=:,.-])|\Z)",
        ("-----begin",),
        0.0,
        1,
    ),
    (
        ".netrc password",
        r"(?i)(?<![\w-])(?:machine[ \t]+[^\s\\]+|default)(?:(?:\s|\\[ntr])+(?:login|account|port|"
        r"protocol)[ \t]+[^\s\\]+){0,4}(?:\s|\\[ntr])+password[ \t]+([^\s\"'\\]+)",
        ("machine", "default"),
        0.0,
        1,
    ),
    (
        ".pgpass line",
        # host (a name, an IP, *) : port : database : user : password, a line of its own
        r"(?:^|\n|\\n)(?:\*|[A-Za-z][\w.-]{0,253}|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]+\])"
        r":(?:\d{1,5}|\*):(?:\*|[A-Za-z_][^\s:\\\"]{0,63}):(?:\*|[A-Za-z_][^\s:\\\"]{0,63}):"
        # (its end: a line's, or JSON's escape of one, which the gate's ``_spaced`` reads as a
        # space and the blank: ``…:pw\\n"`` in a JSON string is ``…:pw \n"`` there)
        r"([^\s\\\"]{4,512})(?=[ ]?(?:$|\r|\n)|\\[nr])",
        (),
        0.0,
        1,
    ),
    (
        "password on a command line",  # curl -u user:pass, --user, --proxy-user, -uuser:pass
        rf"(?i)\bcurl\b[^\n|;&]{{0,400}}?(?:^|[\s\"',])(?:-u|--user|--proxy-user|-U)(?:{_SEP}|=)?"
        rf"{_WORD}{{1,128}}?:({_WORD}{{1,512}})",
        ("curl",),
        0.0,
        1,
    ),
    (
        "password on a command line",  # mysql -p<password> (attached: a space would prompt)
        rf"(?i)\b(?:mysql\w*|mariadb[\w-]*)\b[^\n|;&]{{0,400}}?(?:^|[\s\"',])-p((?!-){_WORD}{{1,512}})",
        ("mysql", "mariadb"),
        0.0,
        1,
    ),
    (
        "password on a command line",  # --password VALUE, --token VALUE, --api-key VALUE
        rf"(?i)(?<![\w-])--(?!no-)(?:[a-z]+-)?(?:password|passwd|pass|token|api-?key|secret|"
        rf"client-secret|auth-token|access-token|private-key){_SEP}((?!-|[a-z]{{1,12}}\b){_WORD}{{4,512}})",
        ("--",),
        0.0,
        1,
    ),
)
