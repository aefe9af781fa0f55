"""``looptap rules check FILE RUN…`` (a dry run of an agent's rules file: what each rule finds, per
run, at which turn) and ``looptap rules learn PASSING_RUN… -o FILE`` (the rules that hold in every
passing run, written for review, never put in force): docs/rules.md."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..analysis import (
    KINDS,
    Finding,
    Rule,
    RulesError,
    codes,
    load,
    parse_rules,
    using,
)
from ..analysis.learning import Proposal, Trace, learn
from ..commands import EXIT_ERROR, EXIT_OK, err
from ..errors import CassetteError, problem_lines
from ..hints import count
from ..models import Message, Part
from ..reading import Run, open_run
from ..recording import seal
from ..storage import check_target, staged
from ..untrusted import clean_line

__all__ = ["cmd_rules_check", "cmd_rules_learn", "proposals_toml", "traces"]

#: ``rules check``'s exit status when a rule is broken (0: none; 2: an error).
EXIT_BROKEN = 1


def _read(path: Path) -> Run:
    """The run at ``path``; a run that cannot be read is a :class:`CassetteError` naming it."""
    try:
        run = open_run(path, whole=True, cache=False)
    except CassetteError as exc:
        raise CassetteError(f"{path}: {exc}") from None
    except OSError as exc:
        raise CassetteError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    for p in problem_lines(run.problems):
        err(f"warning: {path}: {p}")
    return run


def cmd_rules_check(args: argparse.Namespace) -> int:
    rules = load(args.rules)
    if not rules.rules:
        err(f"warning: {rules.path} declares no rule")
    found: list[tuple[str, Finding]] = []
    unread = 0
    with using(rules):
        for name in args.runs:
            try:
                run = _read(Path(name))
            except CassetteError as exc:  # said, and the other runs still checked
                err(f"error: {exc}")
                unread += 1
                continue
            mine = [f for f in run.analysis.findings if f.code == codes.RULE_BROKEN]
            found += [(name, f) for f in mine]
            if not args.json:
                _print_run(name, mine)
    if args.json:
        for name, f in found:
            print(json.dumps(_row(name, f), ensure_ascii=False))
        return EXIT_ERROR if unread else EXIT_BROKEN if found else EXIT_OK
    by_rule = Counter(f.details.get("rule") for _, f in found)
    runs_of = {r: {n for n, f in found if f.details.get("rule") == r} for r in by_rule}
    print(f"{count(len(args.runs), 'run')}, {count(len(rules.rules), 'rule')}:")
    for rule in rules.rules:
        n = by_rule.get(rule.name, 0)
        runs = f"{len(runs_of.get(rule.name, ()))} of {count(len(args.runs), 'run')}"
        what = f"broken {count(n, 'time')} in {runs}" if n else "never broken"
        print(clean_line(f"  {rule.name!r} ({rule.kind}): {what}"))
    if unread:
        err(f"error: {count(unread, 'run')} of {len(args.runs)} could not be read (above)")
        return EXIT_ERROR
    return EXIT_BROKEN if found else EXIT_OK


def _row(run: str, f: Finding) -> dict[str, Any]:
    return {
        "run": run,
        "conversation": f.conversation,
        "turn": f.turn,
        "seq": f.seq,
        "rule": f.details.get("rule"),
        "kind": f.details.get("kind"),
        "tool": f.details.get("tool"),
        "tool_call_id": f.tool_call_id,
        "severity": f.severity.value,
        "why": f.details.get("why"),
    }


def _print_run(name: str, found: list[Finding]) -> None:
    if not found:
        print(clean_line(f"{name}: no rule broken"))
        return
    verb = "breaks" if len(found) == 1 else "break"
    print(clean_line(f"{name}: {count(len(found), 'call')} {verb} a rule"))
    for f in found:  # the conversation, the tool and why are the recording's: one line each
        d = f.details
        print(
            clean_line(
                f"  {f.conversation} turn {f.turn} (seq {f.seq}): {d.get('rule')!r} "
                f"{d.get('tool')}: {d.get('why')}"
            )
        )


# -- learn ---------------------------------------------------------------------------------------


def traces(run: Run, name: str) -> list[Trace]:
    """Each conversation of ``run`` as a trace: the history of its last turn and that turn's
    answer (a request that continues a stored response, ``previous_response_id``, is read after
    the history before it)."""
    out = []
    for conv in run.conversations:
        history: list[Message] = []
        for turn in conv:
            found = run.by_seq(turn.seq)
            rt = found[1] if found is not None else None
            if rt is None or rt.request is None:
                continue
            sent = list(rt.request.messages)
            history = [*history, *sent] if rt.request.previous_response_id else sent
            calls = rt.response.tool_calls if rt.response is not None else []
            answer = Message(
                role="assistant", parts=[Part(kind="tool_call", tool_call=c) for c in calls]
            )
            history = [*history, answer]
        if history:
            out.append(Trace(f"{name} {conv.id}", history))
    return out


def cmd_rules_learn(args: argparse.Namespace) -> int:
    out = Path(args.output)
    target = check_target(out, "the rules file", force=args.force, hint="--force replaces it")
    if args.min_support < 1:
        err("error: --min-support must be 1 or more")
        return EXIT_ERROR
    every: list[Trace] = []
    with using(None):  # the traces as recorded, whatever rules file is about
        for name in args.runs:
            every += traces(_read(Path(name)), name)
    proposals = learn(every, args.min_support)
    text = proposals_toml(proposals, args.runs, len(every), args.min_support)
    try:
        parse_rules(text, str(out))  # what is written reads back
    except RulesError as exc:  # pragma: no cover - a writer's bug, said rather than written
        err(f"error: the proposed rules do not read back: {exc}")
        return EXIT_ERROR
    with staged(target, mode=0o644) as s:  # (written whole, or not at all)
        s.write(seal(text.encode()))
    print(
        clean_line(
            f"{out}: {count(len(proposals), 'rule')} proposed from {count(len(every), 'trace')} "
            f"(conversations) of {count(len(args.runs), 'run')}; review them — nothing is in "
            "force until the file is looptap-rules.toml or named by LOOPTAP_RULES"
        )
    )
    for p in proposals:  # a rule's name holds the recorded tools' names: one line each
        print(clean_line(f"  {p.rule.kind:10} {p.rule.name} ({len(p.support)} traces)"))
    return EXIT_OK


def _c(text: str) -> str:
    """Text for a comment line: recorded names never end it (a newline is written ``\\n``)."""
    return _s(text)[1:-1]


def _s(v: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, and DEL, which JSON leaves as it is and
    TOML refuses, is escaped too."""
    return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")


def _list(vs: Sequence[str]) -> str:
    return "[" + ", ".join(_s(v) for v in vs) + "]"


def _fields(r: Rule) -> list[tuple[str, str]]:
    """The rule's fields as its kind has them (:data:`~cassettes.analysis.KINDS`)."""
    f = []
    for k, typ in KINDS[r.kind].need.items():
        v = getattr(r, "sources" if k == "from" else k)
        f.append((k, _list(v) if typ is tuple else str(v) if typ is int else _s(v)))
    if r.kind == "forbidden":
        f += [("pending", "true")] if r.pending else [("after", _list(r.after))]
    if r.per:
        f.append(("per", _s(r.per)))
    if r.kind != "consent" and not r.pending:
        f.append(("scope", _s(r.scope)))
    return f


def proposals_toml(
    proposals: Sequence[Proposal], runs: Sequence[str], n_traces: int, min_support: int
) -> str:
    """The proposals as a rules file, each with what holds and the traces that support it."""
    lines = [
        f"# Proposed by looptap rules learn from {count(len(runs), 'passing run')} "
        f"({count(n_traces, 'trace')}: one per conversation): {_c(', '.join(runs))}.",
        "# Each rule held in every trace, and is proposed only where at least "
        f"{min_support} traces exercised it",
        "# (docs/rules.md). Review each: a rule that held by accident would flag correct runs.",
        "# Nothing here is in force until this file is looptap-rules.toml or named by "
        "LOOPTAP_RULES.",
    ]
    for p in proposals:
        lines += ["", f"# {_c(p.said)}", f"# supported by {count(len(p.support), 'trace')}: "]
        refs = _c(", ".join(p.support))
        lines[-1] += refs if len(refs) < 400 else refs[:400] + " …"
        lines += ["[[rule]]", f"name = {_s(p.rule.name)}", f"kind = {_s(p.rule.kind)}"]
        lines += [f"{k} = {v}" for k, v in _fields(p.rule)]
    return "\n".join(lines) + "\n"
