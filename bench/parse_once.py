"""Parse once: how often each request and each response body is parsed on its way from the
recorder to the screen, counted by cProfile (issue 30 item 3's evidence).

    python bench/parse_once.py [--against REF] [--files N]

One run built from the corpus's multi-turn recordings (the first ``--files`` Anthropic and OpenAI
files, all their round trips in one cassette, history-delta encoded as the recorder writes it)
goes through three phases, each under cProfile:

* ``recorder``: the writer process's ``CassetteWriter`` as ``proxy/writer.py`` builds it;
* ``inspector``: a run followed as it grows (``open_run(path, follow=True)``) stepped to the end (what the inspector reads as it opens a run),
  then every turn selected once in recording order (``by_seq``, the text timeline, ``full_turn``:
  what ``inspector/app.py`` does on a selection); then, opened again, every turn reached by a jump
  (last first: ``by_seq`` alone, no turn before it shown);
* ``show``: ``looptap show`` of the file, and apart its two passes: ``show: analyse`` (``open_run``,
  the analysis) and ``show: print`` (the printing pass, reading the round trips again from disk).

For each phase, the calls of the functions that parse a body: the request side
(``parse_request_side``: the adapter reads the request's messages) and the response side
(``parse_response_side``: framing and reassembly; ``frame``: a response's chunks framed, by
whoever), and how many stored responses were restored from the record (``sealed.restore``
answering); and, by a counting hook, how many request messages were parsed (a request parsed
against the one it extends parses only what it appended). Per phase per record, so the figures read as "times each body was parsed".
``--against REF`` runs the same in REF's tree (a temporary ``git worktree``) and prints both.
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The functions counted: (label, how its file's path ends, its names: today's and an older
#: tree's). parsing/_roundtrip.py and wire/_framing.py were roundtrip.py and framing.py before.
COUNTED = (
    ("request parsed", "roundtrip.py", ("parse_request_side", "_parse_request")),
    ("response parsed", "roundtrip.py", ("parse_response_side", "_parse_response_side")),
    ("response framed", "framing.py", ("frame",)),
    ("sealed parse checked", "cassettes/parsing/sealed.py", ("restore",)),
)

_CHILD = r'''
import cProfile, contextlib, io, json, pstats, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/tests")
try:
    from real_corpus import corpus_files
except ImportError:  # an older tree: tests/_corpus.py
    from _corpus import corpus_files
try:
    from looptap.cassettes.storage import load_vcr
except ImportError:  # an older tree: before storage's façade
    from looptap.cassettes.storage.vcr import load_vcr
from looptap.cassettes import CassetteWriter

files = [p for p in corpus_files("**/*.yaml") if "anthropic" in str(p) or "openai" in str(p)]
exchanges = []
for p in files:
    got = load_vcr(p)
    if len(got) >= 3:
        exchanges.extend(got)
    if len(exchanges) >= int(sys.argv[3]):
        break
out = Path(sys.argv[2]) / "run.jsonl"
counted = json.loads(sys.argv[4])

# Request messages parsed (a counting hook: all of a request's messages, or only those appended to
# the base it was parsed against).
try:
    from looptap.cassettes.parsing import _roundtrip as roundtrip
except ImportError:  # an older tree: cassettes/parsing/roundtrip.py
    from looptap.cassettes.parsing import roundtrip
_name = "parse_request_side"
if not hasattr(roundtrip, _name):  # an older tree
    _name = "_parse_request"
_real = getattr(roundtrip, _name)
_messages = [0]
def _counting(rt, *args):
    _real(rt, *args)
    n = len(rt.request.messages) if rt.request is not None else 0
    reused = getattr(rt, "reused", None)
    _messages[0] += n - reused[1] if reused is not None else n
setattr(roundtrip, _name, _counting)

def counts(prof):
    st = pstats.Stats(prof)
    got = {}
    for (path, _line, name), (cc, nc, *_rest) in st.stats.items():
        for label, mod, fn in counted:
            if path.endswith(mod) and name in fn:
                got[label] = got.get(label, 0) + nc
    got["request messages parsed"], _messages[0] = _messages[0], 0
    return got

result = {"records": len(exchanges)}
prof = cProfile.Profile()
prof.enable()
try:  # (a tree before 2026-11-26: the recorder's writer parsed unless told not to)
    w = CassetteWriter(out, meta={"source": "looptap proxy"}, requests=False)
except TypeError:  # today's writer parses nothing
    w = CassetteWriter(out, meta={"source": "looptap proxy"})
with w:
    for ex in exchanges:
        w.append(ex)
prof.disable()
result["recorder"] = counts(prof)

try:
    from looptap.cassettes.views.timeline import text_timeline
except ImportError:  # a tree with it in the views package's façade (issue 56 to issue 72)
    from looptap.cassettes.views import text_timeline
try:  # the inspector's reader: a Run followed as it grows (IncrementalRun before it was folded in)
    try:
        from looptap.cassettes.reading import open_run
    except ImportError:  # a tree before the reading package's façade (issue 56)
        from looptap.cassettes.reading.run import open_run
    open_run(out, follow=True).close()
    follow = lambda: open_run(out, follow=True)
except TypeError:
    from looptap.cassettes.reading.incremental import IncrementalRun
    follow = lambda: IncrementalRun(out)
prof = cProfile.Profile()
prof.enable()
run = follow()
while not run.step().at_end:
    pass
run.finish()
prof.disable()
result["inspector: open"] = counts(prof)
prof = cProfile.Profile()
prof.enable()
for seq in sorted(run.summaries):
    ex, rt = run.by_seq(seq)
    text_timeline(ex, rt)
    run.full_turn(seq)
prof.disable()
result["inspector: select every turn"] = counts(prof)
result["turns"] = len(run.summaries)
run.close()
run = follow()  # opened again (not counted): every turn reached by a jump, the last first
while not run.step().at_end:
    pass
run.finish()
_messages[0] = 0  # (the opening's, not counted)
prof = cProfile.Profile()
prof.enable()
for seq in sorted(run.summaries, reverse=True):
    run.by_seq(seq)
prof.disable()
result["inspector: jump to every turn"] = counts(prof)
run.close()

from looptap.cassettes.cli import main
import looptap.cassettes.reading as _reading
if not hasattr(_reading, "open_run"):  # a tree before the reading package's façade (issue 56)
    import looptap.cassettes.reading.run as _reading
# show in its two passes: open_run (the analysis) and what follows (the printing pass, which
# reads the round trips again from disk, one at a time); cmd_show imports open_run when it runs.
_open_run = _reading.open_run
profs = [cProfile.Profile(), cProfile.Profile()]
_analysed = {}
def _opened(*args, **kwargs):
    try:
        return _open_run(*args, **kwargs)
    finally:
        profs[0].disable()
        _analysed.update(counts(profs[0]))
        profs[1].enable()
_reading.open_run = _opened
profs[0].enable()
with contextlib.redirect_stdout(io.StringIO()):
    main(["show", str(out)])
profs[1].disable()
_reading.open_run = _open_run
printed = counts(profs[1])
result["show: analyse"] = _analysed
result["show: print"] = printed
result["show"] = {k: _analysed.get(k, 0) + printed.get(k, 0) for k in {*_analysed, *printed}}
print(json.dumps(result))
'''


def measure(tree: Path, records: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="looptap-parse-once-") as tmp:
        env = {**os.environ, "LOOPTAP_STATE_DIR": str(Path(tmp) / "state"), "PYTHONPATH": str(tree)}
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(tree), tmp, str(records), json.dumps(COUNTED)],
            env=env, cwd=tree, capture_output=True, text=True, check=True,
        )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _table(name: str, r: dict[str, object]) -> list[str]:
    n = int(str(r["records"]))
    lines = [f"{name}: {n} round trips ({r['turns']} turns)"]
    labels = [label for label, _, _ in COUNTED] + ["request messages parsed"]
    lines.append(f"  {'phase':<30}" + "".join(f"{label:>25}" for label in labels))
    for phase in (
        "recorder",
        "inspector: open",
        "inspector: select every turn",
        "inspector: jump to every turn",
        "show: analyse",
        "show: print",
        "show",
    ):
        got = r[phase]
        assert isinstance(got, dict)
        lines.append(
            f"  {phase:<30}"
            + "".join(f"{got.get(label, 0):>17} ({got.get(label, 0) / n:5.2f})" for label in labels)
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--against", help="a commit to measure beside this tree")
    ap.add_argument(
        "--records",
        type=int,
        default=200,
        help="round trips in the run (whole corpus files until this many)",
    )
    args = ap.parse_args()
    print("calls per phase (per round trip in brackets); counted by cProfile")
    if args.against:
        old = Path(tempfile.mkdtemp(prefix="looptap-old-"))
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(old), args.against],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            # The corpus is data: the older tree reads this tree's (the same files).
            for line in _table(f"{args.against}", measure(old, args.records)):
                print(line)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(old)],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
    for line in _table("this tree", measure(ROOT, args.records)):
        print(line)


if __name__ == "__main__":
    main()
