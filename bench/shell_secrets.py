"""The secrets benchmark over a coding agent's shell commands and files (issue 93): sentinels
planted in command lines, in environment-looking output (``env``, ``printenv``, a ``.env``
printed with ``cat``), in file paths and in file contents, through the real ``looptap run
--shell-trace`` (tests/support/bash_agent.py, on the Anthropic Messages API that runs each ``bash``
call with ``/bin/bash -c``; the model a scripted server). Then every file looptap writes of that
run — the cassette, the contents kept beside it (``RUN.jsonl.files/``), ``export --html``,
``--otel``, ``--har``, ``show``, ``show --json``, ``textconv``, the fleet index (``looptap index``,
every table read back) and ``fleet page`` — is searched for every telling piece
(8 characters; 12 of hex, 15 of digits) of every
sentinel (bench/tool_secrets.py's search, shared): **0 expected**. ``looptap verify`` must flag a
cassette with a sentinel put back in each place a process record holds one (argv, stdout,
stderr, a file's path).

    .venv/bin/python bench/shell_secrets.py [--keep DIR]

Needs the recorder's environment (.venv-proxy) and ``strace`` (as ``looptap run --shell-trace``).
tests/reliability/test_shell_secrets.py runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path += [p for p in (str(ROOT), str(ROOT / "bench")) if p not in sys.path]

from tool_secret_cases import _hex, _rnd, sent  # noqa: E402

#: The names of this bench's sentinels (:func:`_mine`).
MINE: set[str] = set()


def _mine(name: str, value: str | None = None) -> str:
    """The sentinel ``name`` (:func:`tool_secret_cases.sent`), counted as this bench's."""
    MINE.add(name)
    return sent(name, value)


from tool_secrets import RUN_CLEAN, _duckdb_text, _looptap, exported, leaks, verdicts  # noqa: E402

from tests.support import bash_agent  # noqa: E402
from tests.support.recorder import PROXY_PYTHON, clean_env  # noqa: E402
from tests.support.scripted import ScriptedUpstream, bash_steps  # noqa: E402

#: The agent (tests/support/bash_agent.py), written beside the run as a script of its own.
AGENT = Path(bash_agent.__file__).read_text()


def sentinels() -> dict[str, str]:
    """The environment the agent runs with: credentials in the formats their issuers use."""
    return {
        "OPENAI_API_KEY": _mine("env/openai", "sk-proj-" + _rnd(48) + "T3BlbkFJ" + _rnd(48)),
        "GITHUB_TOKEN": _mine("env/github", "ghp_" + _rnd(36)),
        "AWS_ACCESS_KEY_ID": _mine(
            "env/aws-id", "AKIA" + _rnd(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        ),
        "AWS_SECRET_ACCESS_KEY": _mine("env/aws-secret", _rnd(40)),
        "STRIPE_API_KEY": _mine("env/stripe", "sk_live_" + _rnd(24)),
        "SLACK_BOT_TOKEN": _mine("env/slack", f"xoxb-{_hex(11)}-{_hex(13)}-{_rnd(24)}"),
        "DATABASE_URL": "postgres://app:"
        + _mine("env/db-password", _rnd(20))
        + "@db.internal:5432/app",
        "MY_SERVICE_SECRET": _mine("env/named-secret", _rnd(32)),
        # issue 101: formats under names that say nothing (found by format alone)
        "NOTION_WORKSPACE": _mine("env/notion", f"ntn_{_rnd(11, '0123456789')}{_rnd(35)}"),
        "MAILGUN_DOMAIN_CONF": _mine("env/mailgun", f"key-{_hex(32)}"),
    }


def untouched_files() -> dict[str, str]:
    """Issue 101: key files in the tree before the run, which the agent never touches (one it
    reads with ``cat``): each in the format its tool writes."""
    pem = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        + _mine("file/pem-no-end", "b3BlbnNzaC1rZXktdjEAAAAA" + _rnd(40))
        + "\n"
        + _rnd(64)
        + "\n"
    )  # cut before its END line
    return {
        ".netrc": "machine api.example.com\n  login bob\n  password "
        + _mine("file/netrc", _rnd(20))
        + "\n",
        "id_ed25519.partial": pem,
        ".pgpass": f"db.internal:5432:shop:app:{_mine('file/pgpass', _rnd(20))}\n",
        ".npmrc": f"//registry.npmjs.org/:_authToken={_mine('file/npmrc', 'npm_' + _rnd(36))}\n",
        ".pypirc": "[pypi]\nusername = __token__\npassword = "
        + _mine("file/pypirc", "pypi-AgEIcHlwaS5vcmc" + _rnd(70))
        + "\n",
        "adc.json": json.dumps(
            {
                "client_id": "764086051850-x.apps.googleusercontent.com",
                "client_secret": _mine("file/gcloud-client-secret", "d-FL95Q" + _rnd(17)),
                "refresh_token": _mine("file/gcloud-refresh", "1//0" + _rnd(60)),
                "type": "authorized_user",
            }
        ),
        "credentials": "[default]\naws_access_key_id = AKIA"
        + _rnd(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        + "\naws_secret_access_key = "
        + _mine("file/aws-credentials", _rnd(40))
        + "\n",
    }


def commands(env: dict[str, str]) -> list[str]:
    """What the scripted model has the agent run: the sentinels in a command line, in ``env`` and
    ``printenv`` output, in a ``.env`` written and printed, in a file's contents and its path."""
    cli = _mine("argv/bearer", _rnd(40))
    anth = _mine("argv/anthropic", "sk-ant-api03-" + _rnd(93) + "AA")
    path_key = _mine("path/github", "ghp_" + _rnd(36))
    dotenv = "\n".join(f"{k}={v}" for k, v in env.items())
    content = _mine("file/stripe", "sk_live_" + _rnd(24))
    return [
        f"echo curl -H {shlex.quote('Authorization: Bearer ' + cli)} https://api.example.com",
        f"ANTHROPIC_API_KEY={anth} true",
        "env | sort",
        "printenv GITHUB_TOKEN AWS_SECRET_ACCESS_KEY",
        f"printf %s {shlex.quote(dotenv)} > .env && cat .env",
        f"echo 'stripe = {content}' > settings.toml && cat settings.toml",
        f"mkdir -p keys && echo x > keys/{path_key}.pem && ls keys",
        # issue 101: command lines (argv, and inside sh -c), a partial key read
        f"curl -s -u bob:{_mine('argv/curl-user', _rnd(18))} http://127.0.0.1:9/ || true",
        f"sh -c 'echo mysql -u root -p{_mine('argv/mysql-p', _rnd(18))} shop'",
        f"echo gh auth login --token {_mine('argv/token-flag', _rnd(24))}",
        "cat id_ed25519.partial",
        "echo done",
    ]


def _planted(run: Path, work: Path, env: dict[str, str]) -> dict[str, bool]:
    """The cassette with a sentinel put back in each place of a process record; whether
    ``looptap verify`` flags each, and under :data:`RUN_CLEAN` whether it calls the run clean
    (one ``verify`` reads them all: :func:`tool_secrets.verdicts`)."""
    lines = run.read_bytes().splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith(b'{"type":"process"'))
    key = _mine("env/github")
    files: dict[str, str] = {}
    for where in ("argv", "argv words", "stdout", "stderr", "files"):
        rec = json.loads(lines[i])
        if where == "argv":
            rec["argv"] = [*rec["argv"], f"--token={key}"]
        elif where == "argv words":  # issue 101: a credential that is a word of its own
            rec["argv"] = ["curl", "-u", f"bob:{_mine('argv/curl-user')}", "http://x"]
        elif where == "files":
            rec["files"] = [["write", f"/w/{key}.pem"]]
        else:
            rec[where] = f"GITHUB_TOKEN={key}\n"
        planted = work / f"planted-{where.replace(' ', '-')}.jsonl"
        planted.write_bytes(
            b"\n".join([*lines[:i], json.dumps(rec).encode(), *lines[i + 1 :]]) + b"\n"
        )
        files[planted.name] = where
    ran = str(run.relative_to(work))
    flagged = verdicts([ran, *files], env, work)
    return {where: flagged[name] for name, where in files.items()} | {RUN_CLEAN: not flagged[ran]}


def run_bench(work: Path) -> dict[str, Any]:
    """Record, write every file, search them; the report (see the module's docstring)."""
    secrets_env = sentinels()
    cmds = commands(secrets_env)
    base = clean_env(
        LOOPTAP_CACHE_DIR=str(work / "cache"), LOOPTAP_PROXY_PYTHON=str(PROXY_PYTHON),
        ANTHROPIC_API_KEY="sk-ant-bench-shell",
    )  # fmt: skip
    if os.environ.get("BENCH_PYTHONPATH"):  # another tree's looptap (as bench/tool_secrets.py)
        base["PYTHONPATH"] = os.environ["BENCH_PYTHONPATH"]
    agent = work / "agent.py"
    agent.write_text(AGENT)
    run = work / "runs" / "run.jsonl"
    run.parent.mkdir()
    tree = work / "tree"
    tree.mkdir()
    for name, text in untouched_files().items():
        (tree / name).write_text(text)
    outputs: dict[str, str] = {}
    with ScriptedUpstream(bash_steps(cmds)) as fake:
        rec = _looptap("run", "--shell-trace", "-o", str(run), "--confdir", str(work / "conf"),
                       "--upstream", f"anthropic={fake.url}", "--", sys.executable, str(agent),
                       env={**base, **secrets_env}, cwd=tree)  # fmt: skip
    outputs["looptap run (stdout, stderr)"] = rec.stdout + rec.stderr
    if rec.returncode != 0 or "answer: done" not in rec.stdout:
        raise RuntimeError(rec.stdout + rec.stderr[-4000:])
    raw = run.read_text("utf-8", "replace")
    outputs["cassette"] = raw
    kept = Path(f"{run}.files")
    for f in sorted(kept.rglob("*")) if kept.exists() else []:
        if f.is_file():
            outputs[f"kept contents {f.name}"] = f.read_text("utf-8", "replace")
    outputs |= exported(run, work, base)
    ex = work / "exports"  # (exported's folder: the fleet's files go beside its exports)
    # the fleet (DuckDB: the fleet extra, in the tests' environment, not the recorder's)
    for args, name in (
        (["index", str(run.parent), "-o", str(ex / "fleet.duckdb")], "index"),
        (
            ["fleet", "page", "--fleet", str(ex / "fleet.duckdb"), "-o", str(ex / "fleet.html")],
            "fleet page",
        ),
        (["fleet", "findings", "--fleet", str(ex / "fleet.duckdb")], "fleet findings"),
    ):
        cli = [sys.executable, "-m", "looptap.cassettes.cli", *args]
        p = subprocess.run(cli, capture_output=True, text=True, env=base, cwd=work, timeout=900)
        outputs[f"{name} (stdout, stderr)"] = p.stdout + p.stderr
        if p.returncode != 0:
            raise RuntimeError(f"{name}: {p.stderr[-2000:]}")
    for f in sorted(ex.rglob("*")):
        if f.is_file():
            outputs[f"file {f.relative_to(ex)}"] = (
                _duckdb_text(f) if f.suffix == ".duckdb" else f.read_text("utf-8", "replace")
            )
    planted = _planted(run, work, base)
    table = {where: leaks(text) for where, text in outputs.items()}
    processes = raw.count('{"type":"process"')
    # the sentinels reached the traced records (else the bench proves nothing): the commands
    # ran, and what masks them is the redactor
    ran = sum(1 for c in cmds if c.split()[0] in raw or "[REDACTED]" in raw)
    return {
        "sentinels": sorted(n for n in leaks_names()),
        "commands": len(cmds),
        "processes": processes,
        "ran": ran,
        "redacted": raw.count("[REDACTED]"),
        "leaks": table,
        "on_disk": sorted({n for v in table.values() for n in v}),
        "verify_clean": planted.pop(RUN_CLEAN),
        "verify_planted": planted,
    }


def leaks_names() -> list[str]:
    """This bench's sentinels (tool_secret_cases.SENT also holds the tool bench's when both ran
    in one process: a test worker that ran tests/reliability/test_tool_secrets.py too)."""
    return sorted(MINE)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = ap.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        report = run_bench(args.keep)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            report = run_bench(Path(tmp))
    print(f"{len(report['sentinels'])} sentinels ({', '.join(report['sentinels'])}) in "
          f"{report['commands']} commands; {report['processes']} process records, "
          f"{report['redacted']} masks in the cassette")  # fmt: skip
    for where, found in report["leaks"].items():
        print(f"  {where:<40} {len(found)}  {', '.join(found)}")
    print(
        f"on disk: {len(report['on_disk'])}; verify calls the run clean: {report['verify_clean']}"
    )
    print(f"verify flags a planted cassette: {report['verify_planted']}")
    ok = not report["on_disk"] and all(report["verify_planted"].values())
    return 0 if ok and report["verify_clean"] else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
