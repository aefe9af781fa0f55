# ruff: noqa: E501  (a catalogue: one case a line or two)
"""The secrets benchmark's sentinels (issue 91, item 1): credentials planted in tool traffic where
real APIs put them, each a fresh random value in the API's own format, by class (docs/redaction.md).

A case is one tool call: what the tool sends (method, path and query, headers, a body of a content
type) and what its API answers (status, headers, body). Where a case follows an API's documentation
its ``api`` names it. :func:`cases` makes them; :data:`SENT` then holds every sentinel by name.
"""

from __future__ import annotations

import base64
import json
import secrets
import string
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

#: Every sentinel planted, by name (``class/where``).
SENT: dict[str, str] = {}

_ALNUM = string.ascii_letters + string.digits


def _rnd(n: int, alphabet: str = _ALNUM) -> str:
    while True:
        v = "".join(secrets.choice(alphabet) for _ in range(n))
        if alphabet != _ALNUM or (
            any(c.isdigit() for c in v)
            and any(c.isupper() for c in v)
            and any(c.islower() for c in v)
        ):
            return v


def sent(name: str, value: str | None = None) -> str:
    """The sentinel ``name`` (made once: a random 24-character token unless ``value``)."""
    if name not in SENT:
        SENT[name] = value if value is not None else _rnd(24)
    return SENT[name]


def _hex(n: int) -> str:
    return _rnd(n, "0123456789abcdef")


def _jwt(name: str) -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"RS256","typ":"JWT"}').rstrip(b"=").decode()
    body = base64.urlsafe_b64encode(
        json.dumps({"sub": _rnd(12), "exp": 1999999999}).encode()
    ).rstrip(b"=")
    return sent(name, f"{head}.{body.decode()}.{_rnd(43, _ALNUM + '-_')}")


@dataclass
class Case:
    """One tool call and its API's answer."""

    name: str
    api: str
    cls: str
    method: str = "GET"
    path: str = "/"
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    status: int = 200
    resp_headers: dict[str, str] = field(default_factory=dict)
    resp_body: str = '{"ok": true}'
    #: Basic credentials requests sends from ``auth=(user, password)``.
    auth: tuple[str, str] | None = None

    def as_json(self, i: int) -> dict[str, Any]:
        return {
            "i": i, "name": self.name, "method": self.method, "path": self.path,
            "headers": self.headers, "body": self.body, "status": self.status,
            "resp_headers": self.resp_headers, "resp_body": self.resp_body,
            "auth": list(self.auth) if self.auth else None,
        }  # fmt: skip


#: Query parameters by name (issue 91's list, and the APIs' own names).
QUERY_NAMES = {
    "client_secret": "OAuth 2.0 (RFC 6749 §2.3.1)",
    "refresh_token": "OAuth 2.0 (RFC 6749 §6)",
    "private_token": "GitLab REST API",
    "pass": "legacy form login", "passwd": "legacy form login", "pwd": "legacy form login",
    "private_key": "issue 91", "session_token": "issue 91", "jwt": "issue 91",
    "bearer": "issue 91", "credential": "issue 91",
    "X-Goog-Signature": "GCP signed URL (V4)", "X-Goog-Credential": "GCP signed URL (V4)",
    "oauth_signature": "OAuth 1.0a (Twitter/X)", "oauth_token": "OAuth 1.0a (Twitter/X)",
    "apiToken": "Jira/Bitbucket style", "auth_token": "Twilio/Telegram-style",
    "secret_key": "issue 91", "accessKey": "Unsplash-style",
    "apikey": "Alpha Vantage", "auth": "Firebase Realtime Database REST (?auth=)",
    "sig": "Azure Storage SAS", "code": "OAuth 2.0 authorization code", "password": "issue 91",
    "secret": "issue 91", "id_token": "OpenID Connect", "X-Amz-Signature": "AWS S3 presigned URL",
    "X-Amz-Security-Token": "AWS S3 presigned URL", "access_token": "Facebook Graph API",
    "key": "Google Maps Platform", "token": "Slack Web API (legacy)", "api_key": "NASA/SerpAPI",
    "signature": "Cloudinary", "subscription-key": "Azure API Management",
    "hapikey": "HubSpot (legacy)", "client_assertion": "OAuth 2.0 JWT bearer (RFC 7523)",
    "sessionid": "Django session in a URL", "api-key": "Azure OpenAI", "authToken": "issue 91",
}  # fmt: skip

#: Request headers by name.
HEADER_NAMES = {
    "X-Api-Key": "many APIs (Anthropic-style)", "PRIVATE-TOKEN": "GitLab REST API",
    "X-Shopify-Access-Token": "Shopify Admin API", "DD-API-KEY": "Datadog API",
    "DD-APPLICATION-KEY": "Datadog API", "X-Vault-Token": "HashiCorp Vault",
    "Ocp-Apim-Subscription-Key": "Azure API Management", "X-RapidAPI-Key": "RapidAPI",
    "X-Auth-Token": "OpenStack", "X-Figma-Token": "Figma REST API",
    "X-Algolia-API-Key": "Algolia", "X-CSRF-Token": "Rails/Django forms",
    "X-Hub-Signature-256": "GitHub webhooks", "Stripe-Signature": "Stripe webhooks",
    "X-Slack-Signature": "Slack request signing", "X-Goog-Api-Key": "Google APIs",
    "X-Amz-Security-Token": "AWS SigV4 (temporary credentials)",
    "X-Session-Token": "issue 91", "X-Client-Secret": "issue 91", "Api-Password": "issue 91",
}  # fmt: skip


def cases() -> list[Case]:
    """The benchmark's cases (the same names each call; fresh values in a new process)."""
    out: list[Case] = []
    # 1. Query parameters: the URL of a tool's call.
    for q, api in QUERY_NAMES.items():
        v = sent(f"query/{q}")
        out.append(Case(f"query {q}", api, "query", path=f"/v1/items?city=Paris&{q}={quote(v)}"))
    # 2. Request headers.
    for h, api in HEADER_NAMES.items():
        v = sent(f"header/{h}")
        out.append(Case(f"header {h}", api, "header", path="/v1/me", headers={h: v}))
    gh = sent("format/github-pat", "ghp_" + _rnd(36))
    out.append(Case("Authorization: Bearer ghp_", "GitHub REST API", "header", path="/user",
                    headers={"Authorization": f"Bearer {gh}"}))  # fmt: skip
    twilio_sid, twilio_tok = "AC" + _hex(32), sent("header/twilio-auth-token", _hex(32))
    out.append(Case("Basic auth (requests auth=)", "Twilio REST API", "header",
                    path=f"/2010-04-01/Accounts/{twilio_sid}/Messages.json",
                    auth=(twilio_sid, twilio_tok)))  # fmt: skip
    pd = sent("header/pagerduty")
    out.append(Case("Authorization: Token token=", "PagerDuty REST API", "header",
                    path="/incidents", headers={"Authorization": f"Token token={pd}"}))  # fmt: skip
    c1, c2 = sent("header/cookie-session"), sent("header/cookie-csrf")
    out.append(Case("Cookie", "Django session", "header", path="/account",
                    headers={"Cookie": f"sessionid={c1}; csrftoken={c2}; theme=dark"}))  # fmt: skip
    # 3. Response headers: what the API hands back.
    sc = sent("resp-header/set-cookie")
    out.append(Case("Set-Cookie", "any web login", "response header", method="POST", path="/login",
                    resp_headers={"Set-Cookie": f"session={sc}; Path=/; HttpOnly"}))  # fmt: skip
    at, it = sent("resp-header/location-access-token"), _jwt("resp-header/location-id-token")
    out.append(Case("Location #access_token (implicit grant)", "OAuth 2.0 implicit (RFC 6749 §4.2)",
                    "URL in a header", path="/authorize", status=302,
                    resp_headers={"Location": f"https://app.example/cb#access_token={at}"
                                              f"&token_type=bearer&id_token={it}&state=xyz"}))  # fmt: skip
    code = sent("resp-header/location-code")
    out.append(Case("Location ?code", "OAuth 2.0 authorization code (RFC 6749 §4.1.2)",
                    "URL in a header", path="/authorize2", status=302,
                    resp_headers={"Location": f"https://app.example/cb?code={code}&state=af0ifjsldkj"}))  # fmt: skip
    lk = sent("resp-header/link-access-token")
    out.append(Case("Link rel=next", "GitHub-style pagination (RFC 8288)", "URL in a header",
                    path="/repos", resp_headers={"Link": f'<https://api.example/repos?page=2&access_token={lk}>; rel="next"'}))  # fmt: skip
    st = sent("resp-header/x-subject-token")
    out.append(Case("X-Subject-Token", "OpenStack Keystone v3", "response header", method="POST",
                    path="/v3/auth/tokens", resp_headers={"X-Subject-Token": st}))  # fmt: skip
    # 4. JSON bodies sent.
    js = {
        "password": "any login API", "client_secret": "OAuth 2.0 token request (JSON)",
        "refresh_token": "OAuth 2.0", "apiKey": "issue 91", "webhook_secret": "issue 91",
        "secretAccessKey": "AWS SDK config", "private_key": "GCP service account key",
        "auth_token": "Twilio", "api_token": "Cloudflare", "db_password": "issue 91",
        "sessionToken": "AWS temporary credentials", "passphrase": "Coinbase Exchange API",
    }  # fmt: skip
    for k, api in js.items():
        v = sent(f"json-request/{k}")
        out.append(Case(f"JSON body {k}", api, "JSON body", method="POST", path="/v1/config",
                        headers={"Content-Type": "application/json"},
                        body=json.dumps({"name": "svc", k: v})))  # fmt: skip
    nested = sent("json-request/nested-credentials-secret")
    out.append(Case("JSON nested credentials", "AWS SDK config", "JSON body", method="POST",
                    path="/v1/aws", headers={"Content-Type": "application/json"},
                    body=json.dumps({"credentials": {"accessKeyId": "AKIAIOSFODNN7EXAMPLE",
                                                     "secretAccessKey": nested}})))  # fmt: skip
    # 5. JSON answers: OAuth token endpoints, STS, minted tokens.
    a, r, i = (
        sent("json-response/access_token"),
        sent("json-response/refresh_token"),
        _jwt("json-response/id_token"),
    )
    out.append(Case("OAuth token response", "OAuth 2.0 token endpoint (RFC 6749 §5.1)",
                    "JSON answer", method="POST", path="/oauth/token-json",
                    resp_body=json.dumps({"access_token": a, "token_type": "Bearer",
                                          "expires_in": 3600, "refresh_token": r, "id_token": i})))  # fmt: skip
    sk, ss = (
        sent("json-response/sts-secret"),
        sent("json-response/sts-session", _rnd(300, _ALNUM + "/+")),
    )
    out.append(Case("STS JSON credentials", "AWS STS (JSON protocol)", "JSON answer", method="POST",
                    path="/sts-json", resp_body=json.dumps({"Credentials": {
                        "AccessKeyId": "ASIA" + _rnd(16, string.ascii_uppercase + "234567"),
                        "SecretAccessKey": sk, "SessionToken": ss, "Expiration": "2026-12-01T00:00:00Z"}})))  # fmt: skip
    ghs = sent("json-response/github-installation", "ghs_" + _rnd(36))
    out.append(Case("GitHub installation token", "GitHub Apps", "JSON answer", method="POST",
                    path="/app/installations/1/access_tokens",
                    resp_body=json.dumps({"token": ghs, "expires_at": "2026-12-01T00:00:00Z"})))  # fmt: skip
    xoxb = sent(
        "json-response/slack-bot",
        f"xoxb-{_rnd(12, string.digits)}-{_rnd(13, string.digits)}-{_rnd(24)}",
    )
    out.append(Case("Slack oauth.v2.access", "Slack API", "JSON answer", method="POST",
                    path="/api/oauth.v2.access",
                    resp_body=json.dumps({"ok": True, "access_token": xoxb, "token_type": "bot"})))  # fmt: skip
    pi = sent("json-response/stripe-client-secret", f"pi_{_rnd(24)}_secret_{_rnd(25)}")
    whsec = sent("json-response/stripe-whsec", "whsec_" + _rnd(32))
    out.append(Case("Stripe PaymentIntent and webhook endpoint", "Stripe API", "JSON answer",
                    method="POST", path="/v1/payment_intents",
                    resp_body=json.dumps({"id": "pi_1", "client_secret": pi, "secret": whsec})))  # fmt: skip
    # 6. Connection strings and URL passwords in JSON and text answers.
    for scheme in ("postgres", "postgresql", "mysql", "redis", "rediss", "mongodb+srv", "amqp",
                   "amqps", "mssql", "ftp", "https"):  # fmt: skip
        p = sent(f"url-password/{scheme}")
        out.append(Case(f"{scheme}:// userinfo in JSON", "database/broker URLs", "URL password",
                        path=f"/v1/dsn/{quote(scheme)}",
                        resp_body=json.dumps({"service": "db", "url": f"{scheme}://app:{p}@db.internal:5432/shop"})))  # fmt: skip
    tok = sent("url-password/github-token-userinfo", "ghp_" + _rnd(36))
    out.append(Case("https://<token>@github.com", "GitHub (git over HTTPS)", "URL password",
                    path="/v1/remote", resp_body=json.dumps({"remote": f"https://{tok}@github.com/org/repo.git"})))  # fmt: skip
    # 7. Forms: OAuth token requests, multipart.
    f1, f2, f3 = sent("form/client_secret"), sent("form/code"), sent("form/code_verifier")
    out.append(Case("form authorization_code grant", "OAuth 2.0 + PKCE (RFC 7636)", "form",
                    method="POST", path="/oauth/token",
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                    body=f"grant_type=authorization_code&client_id=app&client_secret={f1}&code={f2}"
                         f"&code_verifier={f3}&redirect_uri=https%3A%2F%2Fapp.example%2Fcb"))  # fmt: skip
    f4, f5 = sent("form/password"), sent("form/refresh_token")
    out.append(Case("form password grant", "OAuth 2.0 (RFC 6749 §4.3)", "form", method="POST",
                    path="/oauth/token2",
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                    body=f"grant_type=password&username=ada&password={f4}&refresh_token={f5}"))  # fmt: skip
    m1, m2 = sent("multipart/api_key"), sent("multipart/token")
    b = "----bench" + _hex(8)
    out.append(Case("multipart fields", "file upload APIs", "multipart", method="POST",
                    path="/upload", headers={"Content-Type": f"multipart/form-data; boundary={b}"},
                    body=f'--{b}\r\nContent-Disposition: form-data; name="api_key"\r\n\r\n{m1}\r\n'
                         f'--{b}\r\nContent-Disposition: form-data; name="token"\r\n\r\n{m2}\r\n'
                         f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
                         f"Content-Type: text/plain\r\n\r\nhello\r\n--{b}--\r\n"))  # fmt: skip
    # 8. XML: AWS STS, SOAP WS-Security.
    x1, x2 = sent("xml/SecretAccessKey"), sent("xml/SessionToken", _rnd(200, _ALNUM + "/+"))
    out.append(Case("STS AssumeRole XML", "AWS STS (Query API, XML)", "XML", method="POST",
                    path="/sts", resp_headers={"Content-Type": "text/xml"},
                    resp_body=f'<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
                              f"<AssumeRoleResult><Credentials><AccessKeyId>ASIA{_rnd(16, string.ascii_uppercase + '234567')}</AccessKeyId>"
                              f"<SecretAccessKey>{x1}</SecretAccessKey><SessionToken>{x2}</SessionToken>"
                              f"<Expiration>2026-12-01T00:00:00Z</Expiration></Credentials>"
                              f"</AssumeRoleResult></AssumeRoleResponse>"))  # fmt: skip
    x3, x4 = sent("xml/wsse-Password"), sent("xml/Password")
    out.append(Case("SOAP WS-Security", "OASIS WS-Security UsernameToken", "XML", method="POST",
                    path="/soap", headers={"Content-Type": "text/xml"},
                    body=f'<soap:Envelope><soap:Header><wsse:Security><wsse:UsernameToken>'
                         f"<wsse:Username>ada</wsse:Username><wsse:Password>{x3}</wsse:Password>"
                         f"</wsse:UsernameToken></wsse:Security></soap:Header><soap:Body>"
                         f"<Login><User>ada</User><Password>{x4}</Password></Login></soap:Body></soap:Envelope>"))  # fmt: skip
    x5 = sent("xml/attribute-password")
    out.append(Case("XML attribute", "config files", "XML", path="/v1/xmlconf",
                    resp_headers={"Content-Type": "application/xml"},
                    resp_body=f'<config><db host="db.internal" user="app" password="{x5}"/></config>'))  # fmt: skip
    # 9. Plain text: env files, AWS credentials files, YAML, INI.
    e = {k: sent(f"text/{k}") for k in ("AWS_SECRET_ACCESS_KEY", "SECRET_KEY", "DB_PASSWORD",
                                        "GITHUB_TOKEN", "STRIPE_API_KEY", "REDIS_PASSWORD")}  # fmt: skip
    dsn = sent("text/DATABASE_URL-password")
    env_text = (
        "".join(f"{k}={v}\n" for k, v in e.items())
        + f"DATABASE_URL=postgres://app:{dsn}@db/shop\nDEBUG=1\n"
    )
    out.append(Case(".env file", "dotenv / Django settings", "text", path="/v1/env",
                    resp_headers={"Content-Type": "text/plain"}, resp_body=env_text))  # fmt: skip
    a1, a2 = sent("text/aws_secret_access_key"), sent("text/aws_session_token")
    out.append(Case("AWS credentials file", "AWS CLI ~/.aws/credentials", "text", path="/v1/awscreds",
                    resp_headers={"Content-Type": "text/plain"},
                    resp_body=f"[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = {a1}\n"
                              f"aws_session_token = {a2}\nregion = eu-west-1\n"))  # fmt: skip
    y1, y2 = sent("text/yaml-password"), sent("text/yaml-api_key")
    out.append(Case("YAML config", "Kubernetes/Compose-style config", "text", method="PUT",
                    path="/v1/yaml", headers={"Content-Type": "application/yaml"},
                    body=f"database:\n  user: app\n  password: {y1}\nservice:\n  api_key: \"{y2}\"\n"))  # fmt: skip
    # 10. GraphQL.
    g1, g2 = sent("graphql/password"), sent("graphql/variables-token")
    out.append(Case("GraphQL mutation", "GraphQL (login mutation)", "GraphQL", method="POST",
                    path="/graphql", headers={"Content-Type": "application/json"},
                    body=json.dumps({"query": f'mutation {{ login(user: "ada", password: "{g1}") {{ ok }} }}',
                                     "variables": {"token": g2}})))  # fmt: skip
    # 11. Known formats pasted into free text (a tool's answer quoting a config or a log).
    formats = {
        "stripe-live": "sk_live_" + _rnd(24), "stripe-restricted": "rk_live_" + _rnd(24),
        "github-fine": "github_pat_" + _rnd(22) + "_" + _rnd(59), "gitlab": "glpat-" + _rnd(20),
        "slack-user": f"xoxp-{_rnd(11, string.digits)}-{_rnd(11, string.digits)}-{_rnd(12, string.digits)}-{_hex(32)}",
        "sendgrid": "SG." + _rnd(22, _ALNUM + "-_") + "." + _rnd(43, _ALNUM + "-_"),
        "npm": "npm_" + _rnd(36), "pypi": "pypi-AgEIcHlwaS5vcmc" + _rnd(60, _ALNUM + "-_"),
        "openai": "sk-proj-" + _rnd(48), "anthropic": "sk-ant-api03-" + _rnd(93, _ALNUM + "-_") + "AA",
        "google": "AIza" + _rnd(35, _ALNUM + "-_"), "huggingface": "hf_" + _rnd(34),
        "shopify": "shpat_" + _hex(32), "aws-akia": "AKIA" + _rnd(16, string.ascii_uppercase + "234567"),
        "jwt": _jwt("format/jwt-raw"), "digitalocean": "dop_v1_" + _hex(64),
        "doppler": "dp.pt." + _rnd(43, string.ascii_lowercase + string.digits),
        "vault": "hvs." + _rnd(95, _ALNUM + "_-"),
    }  # fmt: skip
    lines = []
    for k, v in formats.items():
        if k != "jwt":
            sent(f"format/{k}", v)
        lines.append(f"found in the build log: {v} (rotate it)")
    out.append(Case("known formats in text", "gitleaks' rules (the APIs' documented formats)",
                    "known format", path="/v1/log", resp_headers={"Content-Type": "text/plain"},
                    resp_body="\n".join(lines)))  # fmt: skip
    # 12. More of the APIs' own places.
    mg = sent("form/mailgun-api-key-basic")
    out.append(Case("Basic api:<key>", "Mailgun API", "header", method="POST", path="/v3/messages",
                    auth=("api", mg)))  # fmt: skip
    az = sent("query/azure-sas-sig-full", base64.b64encode(secrets.token_bytes(32)).decode())
    out.append(Case("Azure SAS URL", "Azure Storage SAS", "query",
                    path=f"/container/blob.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-12-01T00:00:00Z&sig={quote(az, safe='')}"))  # fmt: skip
    gcs = sent("query/gcs-signature-hex", _hex(512))
    out.append(Case("GCS V4 signed URL", "GCP signed URL (V4)", "query",
                    path=f"/bucket/object?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Date=20261128T000000Z&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature={gcs}"))  # fmt: skip
    # 13. A credential in the path (Telegram Bot API).
    tg = sent("path/telegram-bot", f"{_rnd(10, string.digits)}:AA{_rnd(33, _ALNUM + '-_')}")
    out.append(Case("token in the path", "Telegram Bot API", "path", path=f"/bot{tg}/getMe"))
    out += _unnamed(_documented())
    return out


def _documented() -> dict[str, tuple[str, str]]:
    """Issue 101: credentials of 64 more services, each in the format its issuer documents (the
    service's own key-format page; gitleaks' rule for it where it has one), by name: (value,
    where the format is documented)."""
    a, d = _ALNUM, string.digits
    u, lo = string.ascii_uppercase + d, string.ascii_lowercase + d
    b58 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
    return {
        "airtable": (f"pat{_rnd(14)}.{_hex(64)}", "Airtable personal access tokens"),
        "mailgun": (f"key-{_hex(32)}", "Mailgun API keys"),
        "notion-ntn": (f"ntn_{_rnd(11, d)}{_rnd(35)}", "Notion integration secrets (2024)"),
        "notion-secret": (f"secret_{_rnd(43)}", "Notion integration secrets (before 2024)"),
        "discord-bot": (f"MT{_rnd(24)}.{_rnd(6)}.{_rnd(38, a + '-_')}", "Discord bot tokens"),
        "linear": (f"lin_api_{_rnd(40)}", "Linear API keys"),
        "sentry-user": (f"sntryu_{_hex(64)}", "Sentry user auth tokens"),
        "resend": (f"re_{_rnd(8)}_{_rnd(24)}", "Resend API keys"),
        "mapbox-secret": (f"sk.eyJ1{_rnd(30)}.{_rnd(22)}", "Mapbox secret tokens"),
        "netlify": (f"nfp_{_rnd(36)}", "Netlify personal access tokens"),
        "supabase": (f"sbp_{_hex(40)}", "Supabase management API tokens"),
        "vercel": (f"vercel_{_rnd(24)}", "Vercel access tokens"),
        "heroku": (f"HRKU-AA{_rnd(58, a + '_-')}", "Heroku API keys (v2)"),
        "postman": (f"PMAK-{_hex(24)}-{_hex(34)}", "Postman API keys"),
        "asana": (f"2/{_rnd(16, d)}/{_rnd(16, d)}:{_hex(32)}", "Asana personal access tokens"),
        "cloudflare-origin-ca": (f"v1.0-{_hex(24)}-{_hex(146)}", "Cloudflare Origin CA keys"),
        "figma": (f"figd_{_rnd(40, a + '-_')}", "Figma personal access tokens"),
        "atlassian": (f"ATATT3{_rnd(186, a + '_-')}", "Atlassian API tokens"),
        "digitalocean-oauth": (f"doo_v1_{_hex(64)}", "DigitalOcean OAuth tokens"),
        "age": ("AGE-SECRET-KEY-1" + _rnd(58, b58), "age identities"),
        "alibaba": (f"LTAI{_rnd(20)}", "Alibaba Cloud AccessKey IDs"),
        "anthropic-admin": (f"sk-ant-admin01-{_rnd(93, a + '_-')}AA", "Anthropic Admin API keys"),
        "artifactory": (f"AKCp{_rnd(69)}", "JFrog Artifactory API keys"),
        "azure-ad-secret": (f"{_rnd(3)}8Q~{_rnd(34, a + '_.-')}", "Microsoft Entra client secrets"),
        "clojars": (f"CLOJARS_{_rnd(60, lo)}", "Clojars deploy tokens"),
        "databricks": (f"dapi{_hex(32)}", "Databricks personal access tokens"),
        "duffel": (f"duffel_live_{_rnd(43)}", "Duffel access tokens"),
        "dynatrace": (f"dt0c01.{_rnd(24, u)}.{_rnd(64, u)}", "Dynatrace API tokens"),
        "easypost": (f"EZAK{_rnd(54)}", "EasyPost API keys"),
        "flutterwave": (f"FLWSECK_TEST-{_rnd(32, 'abcdefgh' + d)}-X", "Flutterwave secret keys"),
        "frameio": (f"fio-u-{_rnd(64, a + '-_')}", "Frame.io developer tokens"),
        "gitlab-runner": (f"glrt-{_rnd(20)}", "GitLab runner authentication tokens"),
        "gitlab-deploy": (f"gldt-{_rnd(20)}", "GitLab deploy tokens"),
        "gitlab-feed": (f"glft-{_rnd(20)}", "GitLab feed tokens"),
        "gitlab-job": (f"glcbt-{_rnd(4)}_{_rnd(20)}", "GitLab CI/CD job tokens"),
        "gitlab-agent": (f"glagent-{_rnd(50)}", "GitLab agent for Kubernetes tokens"),
        "gitlab-oauth-secret": (f"gloas-{_rnd(64)}", "GitLab OAuth application secrets"),
        "gitlab-scim": (f"glsoat-{_rnd(20)}", "GitLab SCIM tokens"),
        "grafana-cloud": (f"glc_{_rnd(48)}", "Grafana Cloud access policy tokens"),
        "grafana-sa": (f"glsa_{_rnd(32)}_{_hex(8)}", "Grafana service account tokens"),
        "harness": (f"pat.{_rnd(22)}.{_rnd(24)}.{_rnd(20)}", "Harness API keys"),
        "terraform": (f"{_rnd(14, lo)}.atlasv1.{_rnd(67, lo)}", "HCP Terraform API tokens"),
        "infracost": (f"ico-{_rnd(32)}", "Infracost API keys"),
        "octopus": (f"API-{_rnd(26, u)}", "Octopus Deploy API keys"),
        "openshift": (f"sha256~{_rnd(43, a + '_-')}", "OpenShift OAuth access tokens"),
        "planetscale-token": (f"pscale_tkn_{_rnd(43)}", "PlanetScale service tokens"),
        "planetscale-password": (f"pscale_pw_{_rnd(43)}", "PlanetScale passwords"),
        "prefect": (f"pnu_{_rnd(36)}", "Prefect API keys"),
        "pulumi": (f"pul-{_hex(40)}", "Pulumi access tokens"),
        "readme": (f"rdme_{_rnd(70, lo)}", "ReadMe API keys"),
        "rubygems": (f"rubygems_{_hex(48)}", "RubyGems API keys"),
        "scalingo": (f"tk-us-{_rnd(48, a + '_-')}", "Scalingo API tokens"),
        "brevo": (f"xkeysib-{_hex(64)}-{_rnd(16)}", "Brevo (Sendinblue) API keys"),
        "settlemint": (f"sm_pat_{_rnd(16)}", "SettleMint personal access tokens"),
        "shippo": (f"shippo_live_{_hex(40)}", "Shippo API tokens"),
        "shopify-shared": (f"shpss_{_hex(32)}", "Shopify shared secrets"),
        "shopify-custom": (f"shpca_{_hex(32)}", "Shopify custom app tokens"),
        "slack-app": (f"xapp-1-A{_rnd(10, u)}-{_rnd(13, d)}-{_hex(64)}", "Slack app-level tokens"),
        "sourcegraph": (f"sgp_{_hex(16)}_{_hex(40)}", "Sourcegraph access tokens"),
        "square": (f"EAAA{_rnd(60, a + '-_')}", "Square access tokens"),
        "flyio": (f"fo1_{_rnd(43, a + '_-')}", "Fly.io access tokens"),
        "hf-org": (f"api_org_{_rnd(34, string.ascii_letters)}", "Hugging Face organization tokens"),
        "perplexity": (f"pplx-{_rnd(48)}", "Perplexity API keys"),
        "adobe": (f"p8e-{_rnd(32)}", "Adobe client secrets"),
        "maxmind": (f"{_rnd(6)}_{_rnd(29)}_mmk", "MaxMind license keys"),
        "github-user-to-server": (f"ghu_{_rnd(36)}", "GitHub user-to-server tokens"),
    }


def _unnamed(formats: dict[str, tuple[str, str]]) -> list[Case]:
    """Issue 101: each documented format where nothing names it, in turn: a JSON value under a
    neutral key, the second item of a JSON list, a ``text/plain`` log line, a multipart part, a
    form field, base64 of a JSON config, a URL's path."""
    places: dict[str, list[tuple[str, str]]] = {}
    kinds = ("json", "list", "text", "multipart", "form", "base64", "path")
    for n, (name, (value, _doc)) in enumerate(formats.items()):
        places.setdefault(kinds[n % len(kinds)], []).append(
            (name, sent(f"documented/{name}", value))
        )
    out: list[Case] = []
    api = "the services' documented key formats (issue 101)"
    js = {"Content-Type": "application/json"}
    rows = places["json"]
    out.append(Case("formats under a neutral key", api, "documented format", path="/v1/settings",
                    resp_body=json.dumps({"items": [{"id": i, "value": v} for i, (_, v) in enumerate(rows)]})))  # fmt: skip
    rows = places["list"]
    out.append(Case("formats as a list's second item", api, "documented format", method="POST",
                    path="/v1/rows", headers=js, body=json.dumps({"rows": [["ok", v] for _, v in rows]})))  # fmt: skip
    rows = places["text"]
    out.append(Case("formats in a text/plain log", api, "documented format", path="/v1/tail",
                    resp_headers={"Content-Type": "text/plain"},
                    resp_body="\n".join(f"2026-11-28T10:00:0{i}Z INFO client ready with {v}" for i, (_, v) in enumerate(rows))))  # fmt: skip
    rows = places["multipart"]
    parts = "".join(
        f'--b0und\r\nContent-Disposition: form-data; name="note{i}"\r\n\r\n{v}\r\n'
        for i, (_, v) in enumerate(rows)
    )
    out.append(Case("formats in multipart parts", api, "documented format", method="POST",
                    path="/v1/upload", headers={"Content-Type": "multipart/form-data; boundary=b0und"},
                    body=parts + "--b0und--\r\n"))  # fmt: skip
    rows = places["form"]
    out.append(Case("formats in form fields", api, "documented format", method="POST", path="/v1/form",
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                    body="&".join(f"note{i}={quote(v, safe='')}" for i, (_, v) in enumerate(rows))))  # fmt: skip
    rows = places["base64"]
    blobs = [
        base64.b64encode(json.dumps({"config": {"endpoint": "x", "value": v}}).encode()).decode()
        for _, v in rows
    ]
    out.append(Case("formats in base64 JSON", api, "documented format", path="/v1/blobs",
                    resp_body=json.dumps({"blobs": blobs})))  # fmt: skip
    for name, v in places["path"]:
        out.append(Case(f"format in a path ({name})", api, "documented format",
                        path=f"/v1/things/{quote(v, safe='')}/status"))  # fmt: skip
    return out
