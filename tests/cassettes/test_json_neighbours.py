"""Issue 101 (session 51): gitleaks' keyword rules read a ``,`` as an assignment
(``password,"s3cr3t"``), so a scan of JSON text took a list's next item or an object's next key
for a value: the HAR and OTel exports of a real Gemini recording masked ``metadata`` in a tool
schema's ``"required": [..., "password", "metadata", ...]``, and ``verify`` flagged it, while the
cassette's own redaction (each string alone) kept it. The neighbours of JSON's commas are now
kept, and what is a credential after a comma (a CSV line, ``text/plain``, a JSON value, an argv
list) is still masked and flagged (docs/redaction.md, "JSON's commas")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from real_corpus import CORPUS

from looptap.cassettes.recording import Redactor, seal
from looptap.cassettes.verify import scan_lines
from tests.support.analysed import cli_output

RUN = CORPUS / (
    "pydantic-ai/tests/models/google/cassettes/test_output/"
    "test_google_validated_accepts_strict_incompatible_schema.yaml"
)


def test_a_real_schemas_required_list_is_kept_by_the_seal_and_verify(tmp_path: Path) -> None:
    if not RUN.is_file():
        pytest.skip(f"not in this corpus: {RUN}")
    run, har, otel = tmp_path / "run.jsonl", tmp_path / "run.har", tmp_path / "otel.json"
    assert cli_output("import", "-q", "-o", str(run), str(RUN))[0] == 0
    rc, _, err = cli_output("export", "-q", "--har", str(har), "--otel", str(otel), str(run))
    assert rc == 0, err
    for out in (har, otel):
        text = out.read_text()
        assert '\\"password\\",\\"metadata\\",\\"tags\\"' in text, out.name  # (the schema's)
        assert '\\"password\\":\\"[REDACTED]\\"' in text, out.name  # (the answer's value)
        assert scan_lines(text.encode().splitlines(), out.name) == [], out.name


V = "hunter2xyz"
#: A credential after a comma: masked, as text, inside a body of a HAR, and by verify.
CREDENTIALS = {
    "text/plain": f'password,"{V}"',
    "a CSV line": f'bob,password,"{V}"\n',
    "a quoted CSV line": f'"bob","password","{V}"\n',
    "a JSON value": f'{{"user": "bob", "password": "{V}"}}',
    "an assignment": f'password = "{V}"',
    "an argv list": f'["mysql", "--password", "{V}"]',
    "an argv list under a key": f'{{"argv":["curl","--token","{V}"]}}',
    "CSV held in a JSON string": json.dumps({"rows": f'bob,password,"{V}"'}),
    "a list that is not JSON": f'[1, "password", "{V}" x]',
    "a format as a list's item": json.dumps(
        ["password", "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs"]
    ),
}
#: JSON's neighbours a keyword rule took for a value: kept.
NEIGHBOURS = {
    "a schema's required list": '{"required":["name","homepage","password","metadata","tags"]}',
    "an enum": '{"enum": ["password", "passphrase1"]}',
    "an object's next key": '{"type":"password","metadata":{"a":1}}',
    "another rule's keyword": '{"a":["discord", "' + "ab12" * 8 + '"]}',
    "after nested neighbours": '[{"x":[1,2,{"y":"z"}]}, true, "password", "metadata"]',
}


def _forms(text: str) -> dict[str, str]:
    """``text`` as a file holds it, and as the body of a request in a HAR (JSON in a string)."""
    har = {"log": {"entries": [{"request": {"postData": {"text": text}}}]}}
    return {"as text": text, "in a HAR": json.dumps(har)}


@pytest.mark.parametrize("name", sorted(CREDENTIALS))
def test_a_credential_after_a_comma_is_masked_and_flagged(name: str) -> None:
    for form, text in _forms(CREDENTIALS[name]).items():
        secret = V if V in text else "ZnCjm1XVW7vRze4b7Cq4se7kKWs"
        assert secret not in seal(text.encode()).decode(), form
        assert scan_lines([text.encode()]), form


def test_json_held_in_a_string_keeps_a_neighbour_as_the_cassette_records_it() -> None:
    """A tool call's arguments (JSON held in a string) are read as text by the recorder too."""
    record = {
        "arguments": NEIGHBOURS["a schema's required list"],
        "argv": CREDENTIALS["an argv list"],
        "csv": CREDENTIALS["a CSV line"],
    }
    out = Redactor().document(record)
    assert out["arguments"] == record["arguments"]
    assert V not in out["argv"] and V not in out["csv"]


@pytest.mark.parametrize("name", sorted(NEIGHBOURS))
def test_a_neighbour_of_jsons_comma_is_kept_and_not_flagged(name: str) -> None:
    for form, text in _forms(NEIGHBOURS[name]).items():
        assert seal(text.encode()).decode() == text, form
        assert scan_lines([text.encode()]) == [], form
