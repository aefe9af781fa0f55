"""docs/redaction.md's classes, written from the redaction's rule data: the names' rule
(:mod:`._credentials`) and the detector's rules (:mod:`._detector`, gitleaks' ruleset).
``python bench/redaction_doc.py`` writes them; tests/cassettes/test_redaction_doc.py checks that the
page is current. Apart from both rule modules, which import neither this nor each other's docs."""

from __future__ import annotations

from collections.abc import Iterable

from ._credentials import (
    ALWAYS_JOINED,
    ALWAYS_LAST,
    ALWAYS_WORDS,
    MAYBE_LAST,
    NOT_SECRET_NAMES,
    PLACE_WORDS,
    PLACES,
    SECRET_HEADERS,
    STRUCTURED,
    secret_name,
)
from ._detector import LOOPTAP_RULES, NamedRule, UserinfoRule
from ._formats import PLACE_RULES, SERVICE_RULES
from ._gitleaks_rules import RULES

__all__ = ["EXAMPLE_NAMES", "doc_classes"]

#: Names docs/redaction.md shows the rule's answer for, in each place: credentials and the
#: look-alikes that must stay (LLM APIs' usage and parameters, tool arguments, caching ids).
EXAMPLE_NAMES = (
    "password", "client_secret", "aws_secret_access_key", "X-Amz-Signature", "X-Goog-Signature",
    "oauth_signature", "sig", "code", "session", "sessionid", "session_token", "PRIVATE-TOKEN",
    "api_key", "apiToken", "accessKey", "token", "key", "x_llm_key", "pass", "jwt", "pin",
    "client_assertion",
    "max_tokens", "input_tokens", "token_count", "tokenizer", "keywords", "authors", "author",
    "prompt_cache_key", "idempotency_key", "page_token", "nextPageToken", "signature",
    "thoughtSignature", "session_id", "access_key_id", "public_key", "token_type", "grant_type",
    "code_challenge", "Sec-WebSocket-Key",
)  # fmt: skip
_KIND = {"always": "masked", "if-secret": "if it looks like one", None: "kept"}


def doc_classes() -> str:
    """The classes section of docs/redaction.md, as markdown."""

    def words(ws: Iterable[str]) -> str:
        return ", ".join(f"`{w}`" for w in sorted(ws))

    out = [
        "### Names",
        "",
        "A name (a query or fragment parameter, a header, a form or multipart field, a JSON key, "
        "an "
        "XML element or attribute, the name of a `NAME = value` line) is split into words "
        "(lower-cased; `-`, `_` and camelCase split: `openAIApiKey` → open, ai, api, key). It is a "
        "credential's:",
        "",
        f"- always, when a word is one of {words(ALWAYS_WORDS)};",
        f"- always, when its words joined hold one of {words(ALWAYS_JOINED)};",
        f"- always, when its last word is {words(ALWAYS_LAST)};",
        f"- in a structured place ({words(STRUCTURED)}) always, in JSON and text when the value "
        f"looks like a credential, when its last word is {words(MAYBE_LAST)} (a header: any of "
        "its words; counters of tokens excepted);",
    ]
    for w, places in sorted(PLACE_WORDS.items()):
        out.append(f"- `{w}` only in {words(places)};")
    out += [
        f"- never, for {words(NOT_SECRET_NAMES)}, nor a session's id (`session_id`: what links a "
        "run's turns).",
        "",
        f"Always in a header, whatever its name: {words(SECRET_HEADERS)}.",
        "",
        "| name | " + " | ".join(PLACES) + " |",
        "|---|" + "---|" * len(PLACES),
    ]
    for name in EXAMPLE_NAMES:
        out.append(
            f"| `{name}` | " + " | ".join(_KIND[secret_name(name, p)] for p in PLACES) + " |"
        )
    named, userinfo = NamedRule(), UserinfoRule()
    out += [
        "",
        "### Values",
        "",
        f"- **{named.id}**: a value after a credential's name in any text, the name judged by the "
        "rule above for the place it stands in: a query or fragment parameter inside any URL (a "
        "`Location`'s `#access_token=`, a `Link`, a tool's answer), an XML element or attribute "
        '(`<SecretAccessKey>`, `<wsse:Password>`, `password="…"`), a multipart field, a '
        "`NAME = value` / `NAME: value` line (an env file, `aws_secret_access_key = …`, YAML), a "
        "JSON key written in text (a GraphQL query's arguments). In prose the value must look "
        "like a credential, or follow `=` or start a line and not be an identifier "
        "(`api_key=os.environ[…]` stays); placeholders (`${TOKEN}`, `<your key>`) stay.",
        f"- **{userinfo.id}**: the password of a URL's userinfo anywhere in text "
        "(`postgres://app:…@db`, `redis://:…@`, `mongodb+srv://`, `amqp://`, `https://user:…@`), "
        "or a userinfo that is a token alone (`https://<token>@github.com`).",
        f"- **Known formats**: {len(RULES)} rules of gitleaks' ruleset and "
        f"{len(LOOPTAP_RULES) + len(SERVICE_RULES)} of looptap's, found wherever they stand ("
        + ", ".join(sorted({r[0] for r in (*LOOPTAP_RULES, *SERVICE_RULES)}))
        + ").",
        "- **Files and command lines** (`_formats.py`): "
        + ", ".join(sorted({r[0] for r in PLACE_RULES}))
        + ": a PEM private key with or without its END line, `.netrc`'s `password`, a `.pgpass` "
        "line, `curl -u user:<password>`, `mysql -p<password>`, `--password <value>` / "
        "`--token <value>`; in a command line, inside `sh -c`, in a process record's argv (read "
        "as the command line it makes). `NAME=value` is a credential by name (`PGPASSWORD=…`: a "
        "name ending in `password`).",
        "- **Encoded**: a base64 token (20 to 2,048 characters, decoding to text) or a run of "
        "URL-encoded text whose decoded text holds a credential is masked whole.",
        "- **A credential in a URL's path**: after a credential's name (`/key/<key>/`), "
        "`/keys/<key>`, a bot's token (`/bot<id>:<token>/`).",
        "- **Learned values**: every value masked by name or format, masked wherever it comes back "
        "in the run.",
        "",
        "### Bodies",
        "",
        "| content type | read as |",
        "|---|---|",
        "| JSON (and JSON events of SSE, NDJSON, WebSocket, AWS event streams) | keys by name, "
        "JSON held in strings by name, every string by value |",
        "| form-urlencoded, multipart | fields by name (form place), then by value |",
        "| XML, HTML | elements and attributes by name (xml place), then by value |",
        "| text (plain, YAML, env, INI, anything else) | `NAME = value` lines by name (text "
        "place), then by value |",
        "| GraphQL | JSON: `variables` by name, the query's arguments as JSON in text |",
        "",
    ]
    return "\n".join(out)
