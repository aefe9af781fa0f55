"""``looptap why`` on planted-cause cases (issue 68's must-show): for each, a failing run recorded by
the real recorder (real SDKs, or Claude Code, against a scripted upstream whose behaviour is
known), ``looptap why`` on it with no layer chosen (every suspect it finds), and for each
determined verdict ``looptap why DIR --confirm`` on the agent with the planted bug removed.

    .venv/bin/python bench/why_cases.py                  # K = 5, every case
    .venv/bin/python bench/why_cases.py --k 3 --only relay,steps
    .venv/bin/python bench/why_cases.py --docs           # the table into docs/why.md

Per case: the planted cause, the verdict's headline (its layer, conversation and turn), right?
(the planted cause's layer, conversation and turn; or, where nothing on the wire can flip it, no
determined verdict), the verdict's interval, the live calls the budget estimated against the
requests the upstream received (a why's own: its baseline sends none), the wall time of the why,
and the confirm: how many of K runs of the fixed agent succeed. Needs the recorder's environment
(``source /work/briefs/s36/env.sh``); the Claude Code case needs ``LOOPTAP_NPM_AGENTS``.
"""  # noqa: E501

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.why_case_list import CASES, SEED, Case  # noqa: E402
from tests.support.recorder import RECORDER  # noqa: E402

WHY = [sys.executable, "-m", "looptap.cassettes.cli", "why"]
#: The markers between which docs/why.md holds the generated table.
BEGIN, END = "<!-- why_cases: begin -->", "<!-- why_cases: end -->"


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)


def _estimated(err: str, combined: bool) -> tuple[int, int, int] | None:
    """The requests the budget lines on stderr count: the single interventions', plus the
    combinations' first round (the pairs: what is sent when one flips it) when they were
    tried; with the range around it when a re-sampled answer is heard by another conversation
    (``between LOW and HIGH``: each said again as recorded, each changed; else the figure)."""
    singles = re.search(r"(?m)^(?:looptap why: )?([\d,]+) requests? (?:expected )?\(", err)
    between = re.search(r"(?m)^(?:looptap why: )?between ([\d,]+) and ([\d,]+) requests?", err)
    more = re.search(r"and ([\d,]+) requests? more for", err)
    if singles is None:
        return None
    pairs = int(more.group(1).replace(",", "")) if more and combined else 0
    n = int(singles.group(1).replace(",", "")) + pairs
    if between is None:
        return n, n, n
    low, high = (int(between.group(g).replace(",", "")) + pairs for g in (1, 2))
    return n, low, high


def _at_most(err: str) -> int | None:
    """The most the why (or confirm) said it sends live in all, before it sent anything (issue
    95: a true at-most)."""
    said = re.search(r"at most ([\d,]+) requests? sent live in all", err)
    return int(said.group(1).replace(",", "")) if said else None


def kept_to(r: dict[str, Any]) -> bool:
    """A run's estimate within 10% of what was sent, or what was sent under the at-most said
    before anything was sent (a why's; each of its confirms')."""
    gap = _gap(r.get("estimated"), r.get("sent") or 0)
    ok = (gap is not None and abs(gap) <= 0.1) or (
        r.get("at_most") is not None and (r.get("sent") or 0) <= r["at_most"]
    )
    for c in r.get("confirms") or []:
        est, sent, most = (
            c.get("confirm_expected"),
            c.get("confirm_sent") or 0,
            c.get("confirm_at_most"),
        )
        within = bool(est) and sent and abs(est - sent) <= 0.1 * sent
        ok = ok and bool(within or (most is not None and sent <= most))
    return bool(ok)


def _gap(estimated: tuple[int, int, int] | list[int] | None, sent: int) -> float | None:
    """How far the budget's headline figure is from ``sent``, as a share of ``sent``; ``None``
    when not known."""
    if not estimated or not sent:
        return None
    return (estimated[0] - sent) / sent


def run_case(
    case: Case,
    k: int,
    jobs: int,
    tmp: Path,
    confirm_k: list[int] | None = None,
    confirm_repeat: int = 1,
) -> dict[str, Any]:
    env = case.env(tmp)
    row: dict[str, Any] = {"case": case.key, "planted": case.planted}
    with case.serve(recording=True) as fake:
        up = [a for name in case.apis for a in ("--upstream", f"{name}={fake.url}")]
        conf = ["--confdir", str(tmp / "conf")]
        rec = _run(
            [
                *RECORDER,
                "run",
                "-o",
                str(tmp / "run.jsonl"),
                *conf,
                *up,
                *case.record_args,
                "--",
                *case.command(tmp),
            ],
            env,
            tmp,
        )
    if rec.returncode != 1 and not (case.exit_ok and rec.returncode == 0):
        row["error"] = f"recording exited {rec.returncode}: {rec.stderr[-600:]}"
        return row
    run = tmp / "run.jsonl"
    with case.serve(recording=False) as fake:
        up = [a for name in case.apis for a in ("--upstream", f"{name}={fake.url}")]
        t0 = time.perf_counter()
        why = _run(
            [
                *WHY, str(run), *up, *conf, *case.why_args(run, tmp), "--samples", str(k),
                "--jobs", str(jobs), "-o", str(tmp / "w"), "--json", "--", *case.command(tmp),
            ],
            env,
            tmp,
        )  # fmt: skip
        row["wall"] = time.perf_counter() - t0
        row["sent"] = case.sent(fake)
        if why.returncode != 0 or not why.stdout.strip():
            row["error"] = f"why exited {why.returncode}: {why.stderr[-800:]}"
            return row
        doc = orjson.loads(why.stdout)
        v = doc["verdict"]
        combined = any(i.get("kind") == "together" for i in doc.get("interventions") or [])
        row["estimated"] = _estimated(why.stderr, combined)
        row["at_most"] = _at_most(why.stderr)
        row["verdict"] = v
        row["right"] = case.right(v)
        if not v.get("determined"):
            return row
        # each confirm of the same why draws the model anew (the fake's generator goes on)
        ks = [ck for ck in confirm_k or [k] for _ in range(confirm_repeat)]
        for n, ck in enumerate(ks):
            got = _confirm(case, env, tmp, fake, ck, jobs)
            if n == 0:  # the table's confirm: the first K asked
                row.update(got)
            row.setdefault("confirms", []).append(got)
    return row


def _confirm(
    case: Case, env: dict[str, str], tmp: Path, fake: Any, k: int, jobs: int
) -> dict[str, Any]:
    """One ``why --confirm --samples K`` of the fixed agent: what the upstream heard, and how the
    confirm kept to its estimate (its why.json record)."""
    before = case.sent(fake)
    confirm = _run(
        [*WHY, str(tmp / "w"), "--confirm", "--samples", str(k), "--jobs", str(jobs), "--json",
         "--", *case.command(tmp, fixed=True)],
        env,
        tmp,
    )  # fmt: skip
    row: dict[str, Any] = {"confirm_k": k, "confirm_sent": case.sent(fake) - before}
    row["confirm_at_most"] = _at_most(confirm.stderr)
    try:
        c = orjson.loads(confirm.stdout)["confirm"]
        row["confirm"] = (c["succeeded"], c["samples"])
        row["confirm_estimated"] = c.get("expected_requests")
        row["confirm_expected"] = c.get("expected")
        row["confirm_runs"] = [int(r.get("sent") or 0) for r in c["runs"]]
        row["confirm_invalid"] = [
            r["after"] for r in c["runs"] if r["after"].startswith("no sample")
        ]
        for key in ("limit", "stopped", "added", "not_started", "ratio", "sent"):
            row[f"confirm_{key}" if key != "sent" else "confirm_recorded"] = c.get(key)
    except (orjson.JSONDecodeError, KeyError, TypeError):
        row["confirm_error"] = f"exited {confirm.returncode}: {confirm.stderr[-600:]}"
    return row


def keep_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per case and K: each confirm's estimate → what the upstream heard (the ratio), the runs
    judged of those made (stopped at the limit, added), and how many succeeded."""
    out = [
        "| case | K | confirms | estimate → sent (ratio), per confirm | runs judged / made "
        "(stopped, added) | succeeded | the why's verdict right |",
        "|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, int], list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for r in rows:
        for c in r.get("confirms") or []:
            groups.setdefault((r["case"], c["confirm_k"]), []).append((r, c))
    for (case, k), got in groups.items():
        cs = [c for _, c in got if "confirm" in c]
        said = ", ".join(
            f"{c['confirm_expected']:g} → {c['confirm_sent']} "
            f"({c['confirm_sent'] / c['confirm_expected']:.2f})"
            for c in cs
            if c.get("confirm_expected")
        )
        judged = ", ".join(
            f"{c['confirm'][1]}/{len(c['confirm_runs'])}"
            + (
                f" ({c.get('confirm_stopped') or 0}, {c.get('confirm_added') or 0})"
                if c.get("confirm_stopped") or c.get("confirm_added")
                else ""
            )
            for c in cs
        )
        ok = ", ".join(f"{c['confirm'][0]}/{c['confirm'][1]}" for c in cs)
        whys = list({id(r): r for r, _ in got}.values())  # one why, its confirms: its verdict once
        right = sum(1 for r in whys if r.get("right"))
        out.append(f"| {case} | {k} | {len(cs)} | {said} | {judged} | {ok} | {right}/{len(whys)} |")
    ratios = [
        c["confirm_sent"] / c["confirm_expected"]
        for r in rows
        for c in r.get("confirms") or []
        if c.get("confirm_expected")
    ]
    if ratios:
        within = sum(1 for x in ratios if 0.9 <= x <= 1.1)
        out += [
            "",
            f"- {within} of {len(ratios)} confirms sent within 10% of their estimate (ratios "
            f"{min(ratios):.2f}–{max(ratios):.2f})",
        ]
    return out


def _where(v: dict[str, Any]) -> str:
    if not v.get("determined") and not v.get("layer_determined"):
        return "not determined"
    layer = v.get("layer") or "?"
    if v.get("determined"):
        return f"{layer} {v.get('conversation')} t{v.get('turn')}"
    return f"{layer} (layer only, from t{v.get('from_turn')})"


def _short(said: str) -> str:
    """A confirm's reason for no sample, in a table cell: its first clause, no pipes."""
    return said.split(" (and ")[0].split(": C: ")[-1].replace("|", "/")[:110]


def table(rows: list[dict[str, Any]], k: int) -> list[str]:
    out = [
        "| planted cause | verdict | right? | interval | live calls (est. → sent) | wall s "
        "| confirm (fixed agent) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['planted']} | (not run: {r['error'].splitlines()[-1][:120]}) "
                       f"| | | | | |")  # fmt: skip
            continue
        v = r["verdict"]
        interval = (
            f"{v.get('flips')}/{v.get('samples')}, {v.get('low', 0):.2f}–{v.get('high', 0):.2f}"
            if v.get("samples")
            else "—"
        )
        est, gap = r.get("estimated"), _gap(r.get("estimated"), r["sent"])
        said = (
            "?" if not est else f"{est[0]}" + (f" ({est[1]}–{est[2]})" if est[1] != est[2] else "")
        )
        gap_said = "" if gap is None else f" ({gap:+.0%})"
        if "confirm" in r:
            ok, n = r["confirm"]
            bad = r.get("confirm_invalid") or []
            conf = f"{ok}/{n} succeed" + (
                f"; {len(bad)} no sample ({_short(bad[0])})" if bad else ""
            )
            est, sent = r.get("confirm_estimated"), r.get("confirm_sent")
            if est is not None and sent:
                conf += f"; {est} → {sent} sent ({(est - sent) / sent:+.0%})"
        elif "confirm_error" in r:
            conf = f"failed to run: {r['confirm_error'].splitlines()[-1][:80]}"
        else:
            conf = "— (no determined verdict)"
        out.append(
            f"| {r['planted']} | {_where(v)} | {'yes' if r['right'] else '**no**'} | {interval} "
            f"| {said} → {r['sent']}{gap_said} | {r['wall']:.0f} | {conf} |"
        )
    return out


def summary(rows: list[dict[str, Any]]) -> list[str]:
    ran = [r for r in rows if "verdict" in r]
    det = [r for r in ran if r["verdict"].get("determined")]
    wrong = [r for r in det if not r["right"]]
    confirms = [r["confirm"] for r in det if "confirm" in r]
    turned = sum(1 for ok, n in confirms if n and ok / n >= 0.9)
    confirm_gaps = [
        (r["confirm_estimated"] - r["confirm_sent"]) / r["confirm_sent"]
        for r in det
        if r.get("confirm_estimated") is not None and r.get("confirm_sent")
    ]
    within = sum(1 for r in ran if (g := _gap(r.get("estimated"), r["sent"])) is not None
                 and abs(g) <= 0.1)  # fmt: skip
    return [
        f"{len(rows)} cases, {len(ran)} ran; {len(det)} determined, {len(wrong)} of them wrong; "
        f"{len(det) - len(wrong)} determined and right; "
        f"{sum(1 for r in ran if r['right'])} right (a case with nothing on the wire is right "
        "when no cause is determined)",
        f"confirm: {turned} of {len(confirms)} fixed agents succeed in ≥ 90% of their runs "
        f"({sum(1 for _, n in confirms if not n)} with no run that could be judged)",
        f"budget: {within} of {len(ran)} estimates within 10% of the requests sent; "
        f"{sum(1 for r in ran if kept_to(r))} of {len(ran)} whys (their confirms included) within "
        "10% or under the at-most they said first",
        f"confirm budget: {sum(1 for g in confirm_gaps if abs(g) <= 0.1)} of {len(confirm_gaps)} "
        "confirm estimates within 10% of the requests the fixed agents sent",
    ]


def versions() -> str:
    import anthropic
    import openai

    said = [f"openai {openai.__version__}", f"anthropic {anthropic.__version__}"]
    from google import genai

    said.append(f"google-genai {genai.__version__}")
    npm = os.environ.get("LOOPTAP_NPM_AGENTS")
    for name, where in (("Claude Code", "@anthropic-ai/claude-code"), ("Codex", "@openai/codex")):
        pkg = Path(npm or "/nonexistent") / "node_modules" / where / "package.json"
        if npm and pkg.is_file():
            said.append(f"{name} {orjson.loads(pkg.read_bytes())['version']}")
    return ", ".join(said)


def to_docs(lines: list[str]) -> None:
    doc = ROOT / "docs" / "why.md"
    text = doc.read_text()
    block = "\n".join([BEGIN, *lines, END])
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        raise SystemExit(f"{doc} has no {BEGIN} … {END} block to put the table in")
    doc.write_text(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=5, help="samples per intervention and per confirm")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--confirm-k", help="runs of each confirm (default: --k): what a stochastic fixed agent "
        "sends, over more runs; several (3,12): a confirm each, of the same why",
    )  # fmt: skip
    ap.add_argument(
        "--confirm-repeat", type=int, default=1, help="confirms of each K, of the same why (the "
        "model drawn anew each time)",
    )  # fmt: skip
    ap.add_argument(
        "--repeat", type=int, default=1, help="run each case this many times (a stochastic "
        "case's why and confirms drawn again)",
    )  # fmt: skip
    ap.add_argument("--only", help="comma-separated case keys")
    ap.add_argument("--docs", action="store_true", help="write the table into docs/why.md")
    ap.add_argument("--json", metavar="FILE", help="also write the rows there")
    ap.add_argument("--keep", metavar="DIR", help="keep each case's run and why in DIR/CASE")
    ap.add_argument(
        "--rows", metavar="FILE", action="append", default=[],
        help="render the table from the rows of earlier --json files (nothing run)",
    )  # fmt: skip
    opts = ap.parse_args()
    if RECORDER[0] == "None":
        raise SystemExit("needs the recorder's environment: set LOOPTAP_PROXY_PYTHON")
    chosen = [c for c in CASES if not opts.only or c.key in opts.only.split(",")]
    rows = [r for f in opts.rows for r in orjson.loads(Path(f).read_bytes())]
    if opts.rows:
        chosen = []
    confirm_k = [int(x) for x in opts.confirm_k.split(",")] if opts.confirm_k else None
    for case, n in [(c, n) for c in chosen for n in range(opts.repeat)]:
        SEED[0] = 68 + n  # each repetition of a stochastic case drawn again
        missing = case.missing()
        if missing:
            rows.append({"case": case.key, "planted": case.planted, "error": missing})
            continue
        if opts.keep:
            kept = Path(opts.keep) / case.key
            n = 1
            while kept.exists():
                n += 1
                kept = Path(opts.keep) / f"{case.key}.{n}"
            kept.mkdir(parents=True)
            row = run_case(case, opts.k, opts.jobs, kept, confirm_k, opts.confirm_repeat)
        else:
            with tempfile.TemporaryDirectory() as d:
                row = run_case(case, opts.k, opts.jobs, Path(d), confirm_k, opts.confirm_repeat)
        row["seed"] = SEED[0]
        rows.append(row)
        print(table([row], opts.k)[-1], flush=True)
        print(
            f"  at most {row.get('at_most')} said, {row.get('sent')} sent; confirms (at most, "
            "sent): "
            + ", ".join(f"({c.get('confirm_at_most')}, {c.get('confirm_sent')})"
                        for c in row.get("confirms") or [])
            + f"; within 10% or under the at-most: {kept_to(row)}",
            flush=True,
        )  # fmt: skip
        if opts.json:  # kept as they come: a long run stopped halfway keeps its rows
            Path(opts.json).write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    lines = [
        f"Measured {when} by `bench/why_cases.py --k {opts.k}` (K = {opts.k} samples per "
        f"intervention and per confirm; {versions()}; scripted upstreams, the real recorder):",
        "",
        *table(rows, opts.k),
        "",
        *[f"- {s}" for s in summary(rows)],
    ]
    print("\n".join([*lines, "", *keep_table(rows)]))
    if opts.json:
        Path(opts.json).write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    if opts.docs:
        to_docs(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
