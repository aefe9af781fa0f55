"""The recorder's commands, ``looptap record`` and ``looptap run``, and the options they share
(:func:`recorder_options`); their handlers (:mod:`proxy.cli`) run beside mitmproxy."""

from __future__ import annotations

import argparse

from ._registry import Arg, Args, Command, Extend, add_args, flag, many

__all__ = ["RECORD", "RUN", "recorder_options"]


def recorder_options(p: argparse.ArgumentParser, output_required: bool) -> None:
    """The options of ``looptap record`` and ``looptap run``, on ``p`` (the built-in listeners'
    names, in one help text, are read only when one of these commands' parser is built)."""
    from ..providers import REVERSE_UPSTREAMS

    options: Args = {
        "-o --output FILE": Arg(
            "cassette to record into; an existing cassette is replaced (said on stderr), any other "
            "existing file refused unless --force; a link, a directory or a device is always "
            "refused. -o +FILE appends to a cassette instead (as mitmproxy's -w +FILE), and the "
            "summary then describes this run only"
            + (
                ""
                if output_required
                else "; with --inspect it may be left out: a new run-DATE-TIME.jsonl here"
            ),
            required=output_required,
        ),
        "--force": flag("let -o replace an existing file that is not a looptap cassette"),
        "--agent NAME": (
            "the agent's name, kept in the cassette's header: the fleet index groups runs by it "
            "(default $LOOPTAP_AGENT; without either, the index names the agent from the "
            "command run or the directory: docs/fleet.md)"
        ),
        "--port": Arg("first port to listen on (default: free ports)", type=int, default=0),
        "--upstream NAME=URL": many(
            "a reverse listener forwarding to URL (a local model server, a gateway …); the "
            f"NAME of a built-in listener ({', '.join(REVERSE_UPSTREAMS)}) redirects it. Without "
            "it a built-in listener forwards where the API's base-URL variable already points "
            "(OPENAI_BASE_URL …, said at start), else to the vendor"
        ),
        "--record-host HOST": many("also record this host (glob) in forward-proxy mode"),
        "--tool-http": flag(
            "record the tools' HTTP (the default: the calls the agent's tools make through the "
            "proxy to hosts that are not LLM APIs, beside the model calls, never as turns; "
            "docs/recorder.md)"
        ),
        "--no-tool-http": flag("do not record the tools' HTTP (wins over --tool-http)"),
        "--tool-http-exclude HOST": many(
            "leave this host (glob, or HOST:PORT) out of the tools' HTTP recorded: it passes "
            "through unrecorded (repeatable)"
        ),
        "--tool-http-loopback": flag(
            "record tool servers on this machine too (127.0.0.1, localhost): the default; "
            "NO_PROXY then names only looptap's own listeners (docs/recorder.md)"
        ),
        "--no-tool-http-loopback": flag(
            "leave tool servers on this machine (127.0.0.1, localhost) direct and unrecorded: "
            "NO_PROXY names the loopback (the run's summary counts the tool calls with no tool "
            "HTTP seen)"
        ),
        "--ssl-insecure": flag("do not verify upstream TLS certificates"),
        "--confdir": Arg("mitmproxy's configuration and CA directory", default="~/.mitmproxy"),
        "--fsync": flag("fsync the cassette after every round trip"),
        "--redact-header NAME": many(
            "also redact this header's value (repeatable; also [tool.looptap.redact] headers in "
            "./pyproject.toml)"
        ),
        "--redact-pattern REGEX": many(
            "also redact whatever matches this regular expression (repeatable; also "
            "[tool.looptap.redact] patterns)"
        ),
        "--durable": flag(
            "hold the end of each response (over a WebSocket, the message that completes a turn) "
            "until its round trip is in the cassette: even a SIGKILL of looptap then loses no "
            "round trip the agent finished receiving (each response waits for the writer)"
        ),
        "--fault SELECTOR:KIND": many(
            "answer chosen LLM requests with an API failure in the API's own format instead of "
            "forwarding them (repeatable): 'request=2:rate_limit', 'p=0.2:overloaded', "
            "'*:slow_first_byte=3'; live kinds: rate_limit, overloaded, server_error, "
            "context_length, reset, slow_first_byte (docs/faults.md)"
        ),
        "--fault-seed": Arg(
            "seed of the p= fault selectors (the same seed, the same faults)",
            type=int,
            default=0,
        ),
        "--listen-host HOST": Arg(
            "address the listeners bind (default 127.0.0.1, loopback only). Anything else exposes "
            "the proxy, and the API keys passing through it, to other machines: a warning is "
            "printed",
            default="127.0.0.1",
        ),
        "--ready-file PATH": (
            "once listening, write PATH (JSON, mode 0600, atomically): the pid, the listeners' "
            "ports and URLs, the proxy URL, the CA certificate, the environment the export lines "
            "give, the cassette and looptap's version; removed when the recorder stops "
            "(docs/recorder.md)"
        ),
    }
    add_args(p, (options,))


RECORD = Command(
    "record",
    "run the recording proxy until Ctrl-C; prints the environment to export",
    Extend("looptap.cassettes.commands._recording:recorder_options", output_required=True),
    run="looptap.proxy.cli:cmd_record",
    epilog=(
        "exit status: 0 every round trip was recorded; 2 the recorder could not start; 3 some "
        "round trips could NOT be stored (counted and named on stderr). See docs/recorder.md"
    ),
)


RUN = Command(
    "run",
    "record a command's LLM traffic: looptap run -o run.jsonl -- python agent.py",
    Extend("looptap.cassettes.commands._recording:recorder_options", output_required=False),
    {
        "--shell-trace": flag(
            "trace each of the command's processes (Linux, strace): its program, exit status, "
            "output's start and the files it wrote, linked to the model's shell tool calls. "
            "Opt-in: the tracer takes ptrace, so a debugger, strace or profiler the command runs "
            "cannot attach and a setuid program runs without its privilege; it cost 1.5x CPU on "
            "a test suite (docs/shell-file-tools.md)"
        ),
        "--no-shell-trace": flag(
            "do not take the command's working tree per turn (taken by default, without a "
            "process tracer; docs/shell-file-tools.md)"
        ),
        "--copy-tree": flag(
            "keep the start contents of every file of the working tree beside the cassette "
            "(OUTPUT.files/), read while the command starts: a fork can then put back any file, "
            "in git or not (by default only the files the command changed are kept, at their "
            "first change; docs/shell-file-tools.md)"
        ),
        "--inspect": flag(
            "open the inspector on the run while it is recorded (the command's output goes to "
            "OUTPUT.log, its stdin is /dev/null); looptap exits when the command has finished "
            "and the inspector is closed (q). While the inspector is open, Ctrl-C goes to it, "
            "not to the command"
        ),
        "--from RUN@SELECTOR": Arg(
            "fork a recorded run: its prefix is served from RUN (nothing leaves the machine), "
            "from the selected turn on (turn=2, seq=7, conversation=c2:turn=1; divergence: "
            "each conversation from its first request that differs) requests go live and are "
            "recorded into -o (docs/fork.md)",
            dest="from_run",
        ),
        "--model": "with --from: the model of every request sent live (same API family)",
        "--in-place": flag(
            "with --from: run the agent in this working tree, not in a scratch copy of it as it "
            "was at the recording's start (the default; docs/shell-file-tools.md); a fork that "
            "cannot be isolated (no mount namespace, a run whose tree was not recorded) is "
            "refused without it; LOOPTAP_IN_PLACE=1 gives it to every fork but --verify's branches"
        ),
        "--keep-tree": flag(
            "with --from: keep the fork's scratch copy of the working tree when it ends (removed "
            "by default; its changes are on the branch's record either way)"
        ),
        "--prefix": Arg(
            "with --from: how the prefix is matched: strict (default: as replay, volatile "
            "spans tolerated) or tolerant (a request that differs from its recorded turn only "
            "in tool results is answered in position; every difference listed; docs/fork.md)",
            choices=("strict", "tolerant"),
        ),
        "--tools-offline": flag(
            "with --from: a tool's HTTP call the run does not answer fails (a 400 naming the "
            "recorded call closest to it) instead of going to its live host (docs/fork.md)"
        ),
        "--no-volatile": flag(
            "with --from: the prefix's requests must equal the recorded ones as sent (no date, "
            "id, temp path, cwd or port tolerated; docs/testing.md)"
        ),
        "--max-requests N": Arg(
            "with --from: send at most N requests live (each run, with --repeat); past N nothing "
            "is sent: the agent gets its API's error (400, not retried) and the branch says the "
            "fork stopped at the limit (docs/fork.md)",
            type=int,
        ),
    },
    Extend("looptap.cassettes.project:add_rule_flags", fork=True),
    {
        "--repeat K": Arg(
            "with --from: run the agent K times from the cursor (into OUTPUT.1 … OUTPUT.K) "
            "and say per turn how the branches agree",
            type=int,
            default=1,
        ),
        "--verify CMD": Arg(
            "with --from: judge each branch by a shell command run in its own tree after the "
            "agent ends (exit status 0: verified). With it, --model takes a list (A,B,…; "
            "'recorded' for the run's own model), --repeat K branches per model run concurrently "
            "(--jobs), -o names a directory, and one line per model says k/K verified with its "
            "95%% interval, cost and requests, beside the recorded run's own end state verified "
            "again (docs/fork.md)"
        ),
        "--verify-timeout S": Arg(
            "with --verify: the command's own time limit in seconds (default 600); past it the "
            "branch is not verified (timed out)",
            type=float,
            default=600.0,
        ),
        "--jobs N": Arg("with --verify: branches run at once (default 2)", type=int, default=2),
        "--max-cost USD": (
            "with --verify: refuse (before anything is sent) when what the branches may send at "
            "most could cost more"
        ),
        "--allow-unknown-price": flag(
            "with --verify: run under --max-cost although a model has no known price"
        ),
        "--json": flag("with --verify: the report as JSON on stdout"),
        "--verify-one": Arg(help=argparse.SUPPRESS, action="store_true"),
        "--edit TARGET=@FILE": many(
            "with --from: what if: rewrite tool_result[CALL_ID], system or user[N] in every "
            "request sent live; or continue=N: continue an answer cut at the token cap, the "
            "agent handed one answer (repeatable; docs/fork.md)"
        ),
        "cmd": Arg("the command to run, after --", nargs=argparse.REMAINDER),
    },
    run="looptap.proxy.cli:cmd_run",
    epilog=(
        "exit status: the command's own status; if it succeeded but some round trips could NOT "
        "be stored, 3 (they are counted and named on stderr whatever the status); 2 the "
        "recorder could not start; 127 the command could not be started. See docs/recorder.md"
    ),
)
