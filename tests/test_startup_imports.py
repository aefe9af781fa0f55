"""What the commands a user waits on import before they answer (issue 30): ``looptap show`` of a
small run and ``looptap replay`` up to its export lines load no network client, no JSON Schema
validator unless a schema is checked, and not genai-prices' price updater; a core subcommand is
found without reading every installed package's metadata; the process does not walk its heap at
exit. Checked by the module names in ``sys.modules`` (and the collector's state) of a fresh
interpreter, not by time (the figures are bench/startup.py's).
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange
from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, needs_recorder

URL = "https://api.openai.com/v1/chat/completions"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
#: Never needed before these commands answer: a network client and its event loop, the price
#: updater that uses them, the dependencies of a schema check, the engine of user patterns (RE2:
#: loaded when a pattern is given, cassettes/patterns.py).
NEVER = ("httpx", "httpx2", "genai_prices.update_prices", "anyio", "h11", "httpcore", "re2")
SCHEMA_CHECK = ("jsonschema", "referencing", "jsonschema_specifications", "rpds")


def _exchange(
    messages: list[dict[str, object]], answer: dict[str, object], tools: bool
) -> Exchange:
    body: dict[str, object] = {
        "model": "gpt-4o",
        "messages": messages,
        **({"tools": TOOLS} if tools else {}),
    }
    response = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", **answer},
                "finish_reason": "tool_calls" if "tool_calls" in answer else "stop",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }
    return Exchange(
        "POST",
        URL,
        [("content-type", "application/json")],
        orjson.dumps(body),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.01, orjson.dumps(response))],
        ttfb=0.01,
    )


def _run(path: Path, tools: bool, arguments: str = '{"city":"Paris"}') -> Path:
    """Two round trips of one conversation: with ``tools``, a call (``arguments``) checked against
    the tool's schema and the answer to its result; without, two plain chat turns."""
    user = {"role": "user", "content": "Weather in Paris?"}
    if tools:
        call = {
            "id": "call_A1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": arguments},
        }
        first = _exchange([user], {"content": None, "tool_calls": [call]}, tools)
        second = _exchange(
            [
                user,
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_A1", "content": "sunny"},
            ],
            {"content": "It is sunny in Paris."},
            tools,
        )
    else:
        first = _exchange([user], {"content": "Which Paris?"}, tools)
        second = _exchange(
            [
                user,
                {"role": "assistant", "content": "Which Paris?"},
                {"role": "user", "content": "France."},
            ],
            {"content": "Sunny."},
            tools,
        )
    with CassetteWriter(path) as w:
        w.append(first)
        w.append(second)
    return path


def _modules(code: str, **env: str) -> set[str]:
    """The modules a fresh interpreter holds after ``code`` (its stdout goes nowhere)."""
    return _modules_and_output(code, **env)[0]


def _modules_and_output(
    code: str, python: str = sys.executable, **env: str
) -> tuple[set[str], str]:
    """The modules a fresh interpreter (``python``) holds after ``code``, and what ``code`` printed
    (with ``env`` set)."""
    script = (
        "import os, sys\n"
        "real = os.dup(1); os.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n"
        "printed = os.open(sys.argv[1], os.O_WRONLY); sys.stdout.flush(); os.dup2(printed, 1)\n"
        f"{code}\n"
        "sys.stdout.flush(); os.write(real, '\\n'.join(sorted(sys.modules)).encode())\n"
    )
    import tempfile

    with tempfile.NamedTemporaryFile() as printed:
        out = progress.run(
            [python, "-c", script, printed.name],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parents[1],
            env={**os.environ, **env},
        )
        return set(out.stdout.split()), Path(printed.name).read_text()


def _loaded(mods: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in mods if m in names or m.startswith(tuple(f"{n}." for n in names)))


def test_show_of_a_small_run_loads_no_network_client_nor_schema_validator(tmp_path: Path) -> None:
    path = _run(tmp_path / "chat.jsonl", tools=False)
    mods = _modules(f"from looptap.cassettes.cli import main\nmain(['show', {str(path)!r}])")
    # it did analyse and price the run
    assert "looptap.cassettes.analysis._tokens" in mods and "genai_prices.data" in mods
    assert _loaded(mods, NEVER) == []
    assert _loaded(mods, SCHEMA_CHECK) == []
    # a core command loads no other command's module (their entry points are not loaded)
    assert (
        _loaded(
            mods,
            (
                "looptap.proxy",
                "looptap.inspector",
                "looptap.cassettes.replay",
                "looptap.cassettes.mcp",
                "looptap.cassettes.interop",
                # nor the recorder's redactor (the placeholder the analysis knows is wire's)
                "looptap.cassettes.recording",
            ),
        )
        == []
    )
    # the objects it prints are built without the schema's model classes
    # (cassettes/views/_roundtrip_object.py)
    assert "looptap.cassettes.views._roundtrip_object" in mods
    assert _loaded(mods, ("looptap.cassettes.views.schema",)) == []
    # nor PyYAML: the storage package's vcrpy reader loads it when it reads a cassette
    assert "looptap.cassettes.storage._vcr" in mods and _loaded(mods, ("yaml",)) == []
    # nor what only an agent's rules use: their checker (no rules in force) and their miner
    assert _loaded(mods, AGENT_RULES) == []
    # nor the views it never calls: search, timelines, the HTML report and its page (gzip)
    assert "looptap.cassettes.views" in mods
    assert _loaded(mods, NOT_SHOWN) == [], _loaded(mods, NOT_SHOWN)


#: The views a ``show`` never calls: the inspector's, ``looptap mcp``'s, the HTML report's.
NOT_SHOWN = tuple(
    f"looptap.cassettes.views.{m}" for m in ("search", "timeline", "report", "htmlpage")
) + ("gzip",)


#: What only an agent's rules use: ``looptap rules learn``'s miner and the rules' checker.
AGENT_RULES = ("looptap.cassettes.analysis.learning", "looptap.cassettes.analysis._rule_check")


def test_show_loads_the_rules_checker_when_a_file_puts_rules_in_force(tmp_path: Path) -> None:
    """The twin: with a rules file in force, ``show`` loads the checker and a call that breaks a
    rule is reported (the miner still stays out)."""
    path = _run(tmp_path / "tools.jsonl", tools=True)
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nname = "ask first"\nkind = "consent"\ntools = ["get_weather"]\n')
    mods, out = _modules_and_output(
        "from looptap.cassettes.cli import main\n"
        f"try:\n    main(['show', '--no-cache', {str(path)!r}])\nexcept SystemExit:\n    pass",
        LOOPTAP_RULES=str(rules),
    )
    assert _loaded(mods, AGENT_RULES) == ["looptap.cassettes.analysis._rule_check"]
    assert "E.rule_broken" in out and "ask first" in out, out


_PLUGIN = """
import os
class Plugin:
    def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind, config, plugin_settings):
        with open(os.environ["PLUGIN_SAW"], "a") as f:
            f.write(schema_type_path.name + "\\n")
        return None, None, None
plugin = Plugin()
"""  # noqa: E501


def test_a_declared_pydantic_plugin_is_loaded_by_show(tmp_path: Path) -> None:
    """The twin: a distribution that declares a ``pydantic`` entry point gets its plugin loaded, as
    pydantic loads it, and it sees looptap's models being built."""
    path = _run(tmp_path / "chat.jsonl", tools=False)
    site = tmp_path / "site"
    (site / "looptap_test_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "looptap_test_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: looptap-test-plugin\nVersion: 1.0\n"
    )
    (site / "looptap_test_plugin-1.0.dist-info" / "entry_points.txt").write_text(
        "[pydantic]\nsaw = looptap_test_plugin:plugin\n"
    )
    (site / "looptap_test_plugin.py").write_text(_PLUGIN)
    saw = tmp_path / "saw.txt"
    saw.touch()
    code = (
        f"import sys\nsys.path.insert(0, {str(site)!r})\nfrom looptap.cassettes.cli import "
        f"main\nmain(['show', {str(path)!r}])"
    )
    mods = _modules(code, PLUGIN_SAW=str(saw))
    assert "importlib.metadata" in mods and "looptap_test_plugin" in mods
    assert "NormalisedResponse" in saw.read_text().split()


def test_show_checks_a_plain_call_without_the_schema_validator(tmp_path: Path) -> None:
    """A call that plainly satisfies its tool's schema is told valid without jsonschema
    (cassettes/analysis/_plain_schema.py); one that does not is checked by jsonschema, whose words
    the finding carries."""
    mods = _modules(
        "from looptap.cassettes.cli import main\nmain(['show', "
        f"{str(_run(tmp_path / 'tools.jsonl', tools=True))!r}])"
    )
    assert "looptap.cassettes.analysis._emission" in mods
    assert _loaded(mods, NEVER) == []
    assert _loaded(mods, SCHEMA_CHECK) == []
    bad = _run(tmp_path / "bad.jsonl", tools=True, arguments='{"city":5}')
    mods = _modules(f"from looptap.cassettes.cli import main\nmain(['show', {str(bad)!r}])")
    assert "jsonschema" in mods
    assert _loaded(mods, NEVER) == []


def test_replay_serves_without_the_analysis(tmp_path: Path) -> None:
    """``looptap replay`` up to its export lines: the server is built, the recording indexed;
    the analysis (and pricing, schema checks) loads when a miss or the report needs it."""
    path = _run(tmp_path / "tools.jsonl", tools=True)
    mods = _modules(
        "import looptap.cassettes.cli\nfrom looptap.cassettes.replay.command import cmd_replay\n"
        "from looptap.cassettes.replay.serving.server import ReplayServer\n"
        f"s = ReplayServer({str(path)!r})\n"
        "assert len(s.matcher.recorded) == 2\n"
    )
    assert _loaded(mods, NEVER) == []
    assert _loaded(mods, SCHEMA_CHECK) == []
    assert _loaded(mods, ("looptap.cassettes.analysis", "genai_prices")) == []


def test_the_pattern_engine_loads_with_a_user_pattern_only() -> None:
    """The pytest plugin loads no RE2 (every test run pays for what it loads); a substitution
    rule, a redaction pattern, do (the twin: the check can fail)."""
    assert _loaded(_modules("import looptap.cassettes.replay.testing.plugin"), ("re2",)) == []
    for code in (
        "from looptap.cassettes.matching import parse_substitution\nparse_substitution('a+=b')",
        "from looptap.cassettes.recording import Redactor\nRedactor.configured(patterns=['k-.+'])",
    ):
        assert "re2" in _modules(code), code


#: The rules' machinery: what checking a rule loads (its parser, the volatile detectors, the pattern
#: engine's wrapper, the API families' adapters).
RULES_CHECKER = (
    "looptap.cassettes.matching._rules",
    "looptap.cassettes.matching._ruletable",
    "looptap.cassettes.matching._volatile",
    "looptap.cassettes.patterns",
    "looptap.cassettes.providers",
)


def _pytest_session(project: Path, alone: bool) -> tuple[set[str], str]:
    """The modules of a ``pytest --co`` session of ``project`` (the plugin loaded from its entry
    point: with every installed plugin, or ``alone`` by its entry point's name), and what it
    printed: its output, its errors, its exit code last."""
    only = "'-p', 'looptap', " if alone else ""
    code = (
        f"import os, sys, pytest\nos.chdir({str(project)!r}); sys.stderr = sys.stdout\n"
        f"print(int(pytest.main(['-q', '--co', '-p', 'no:cacheprovider', {only}'--rootdir', '.'])))"
    )
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"} if alone else {}
    return _modules_and_output(code, **env)


#: The session without rules loads every installed plugin, as a user's does: none of them may load
#: the rules' machinery either. The sessions with rules load looptap's alone (by its entry point's
#: name): the environment's other plugins took 1.5 s of CPU a session against 0.45 s (session 56).
@pytest.mark.parametrize(
    ("files", "checked", "said", "alone"),
    [
        ({"pyproject.toml": '[project]\nname = "plain"\n'}, False, "0", False),
        (
            {"pyproject.toml": "[tool.looptap]\nignores = ['metadata.*']\n"},
            True,
            "pyproject.toml [tool.looptap]: unknown key 'ignores'",
            True,
        ),
        ({"pytest.ini": "[pytest]\nlooptap_ignore = metadata.*\n"}, True, "0", True),
        ({"looptap.toml": "volatile = false\n"}, True, "0", True),
    ],
    ids=["no-rules", "project-rule", "ini-rule", "looptap-toml"],
)
def test_the_pytest_plugin_loads_the_rules_checker_only_for_declared_rules(
    tmp_path: Path, files: dict[str, str], checked: bool, said: str, alone: bool
) -> None:
    """Every pytest session of a project with looptap installed configures the plugin, which
    checks the project's rules then: the project's file is read, and the rules' machinery loads
    only when the file or the ini declares rules (the twins: it does, and a bad rule is refused
    at start-up)."""
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    mods, out = _pytest_session(tmp_path, alone)
    assert "looptap.cassettes.replay.testing.plugin" in mods and "looptap.cassettes.project" in mods
    assert bool(_loaded(mods, RULES_CHECKER)) is checked, _loaded(mods, RULES_CHECKER)
    assert said in out and out.splitlines()[-1] == ("4" if said != "0" else "0"), out


def test_genai_prices_is_whole_for_whoever_asks() -> None:
    """The package registered without its updater is the real one on first use of any of its
    names."""
    code = (
        "import sys\n"
        "from looptap.cassettes.analysis import calc_price, PRICES_VERSION\n"
        "assert 'genai_prices.update_prices' not in sys.modules\n"
        "import genai_prices\n"
        "from genai_prices import Usage, UpdatePrices, calc_price as lib_calc\n"
        "assert 'genai_prices.update_prices' in sys.modules\n"
        "assert genai_prices.__version__ == PRICES_VERSION\n"
        "from importlib.metadata import version\n"
        "assert PRICES_VERSION == version('genai-prices')\n"
        "mine = calc_price({'input_tokens': 1000, 'output_tokens': 100}, 'gpt-4o', "
        "provider_id='openai')\nlib = lib_calc(Usage(input_tokens=1000, output_tokens=100), "
        "model_ref='gpt-4o', provider_id='openai')\nassert mine == (lib.total_price, "
        "lib.provider.id, lib.model.id), (mine, lib)\n"
    )
    mods = _modules(code)
    assert "genai_prices.data" in mods


def test_a_command_is_built_from_its_declaration_without_loading_its_handler() -> None:
    """Every ``looptap`` command is declared once (:data:`cassettes.commands.COMMANDS`): its parser
    is built from the declaration without reading every installed package's entry points and
    without importing the handler's module (imported when the command runs)."""
    from looptap.cassettes.commands import COMMANDS

    handlers = sorted({c.run.partition(":")[0] for c in COMMANDS if c.run})
    assert "looptap.proxy.cli" in handlers and "looptap.cassettes.replay.command" in handlers
    code = (
        "import sys\n"
        "import looptap.cassettes.cli as c\n"
        f"for name in {sorted(c.name for c in COMMANDS)!r}:\n"
        "    assert name in c.build_parser(name)._subparsers._group_actions[0].choices\n"
        f"print('LOADED', *sorted(n for n in ('importlib.metadata', *{handlers!r}) "
        "if n in sys.modules))\n"
    )
    out = progress.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[1],
    ).stdout
    assert out.strip() == "LOADED", out


@pytest.mark.parametrize("argv", [["--help"], ["-h", "show"], ["--he", "replay", "x.jsonl"]])
def test_the_top_level_help_lists_every_command_and_builds_none_of_their_arguments(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The top-level help lists each command by its name and help line, nothing of its arguments:
    ``looptap --help`` builds none of them (nor loads the modules that add some: the rule flags'
    ``project``, the recorder options' listener names in ``providers``), and prints what the
    parser of every command in full prints. A help that comes before a command is that same
    help, listing every command (it listed only the command named after it)."""
    from looptap.cassettes.cli import build_parser

    monkeypatch.setenv("COLUMNS", "100")
    code = (
        "from looptap.cassettes.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
    )
    mods, printed = _modules_and_output(code, COLUMNS="100")
    assert printed == build_parser().format_help()
    assert "looptap.cassettes.cli" in mods
    assert _loaded(mods, ("looptap.cassettes.project", "looptap.cassettes.providers")) == []


def test_help_loads_no_path_or_url_library_nor_the_sanitiser() -> None:
    """Issue 94 item 4: ``looptap --help`` loaded 94 modules over bare Python at c86d115d against
    fec4f2c2's 84: ``pathlib`` (and the ``urllib.parse``, ``ipaddress`` and ``ntpath`` it loads)
    and ``importlib.util`` for ``lazy.init_on_first_use`` (only the recorder's and genai-prices'
    registration need them), and the sanitiser for the command registry's ``err()`` (only when it
    says something). None of them is loaded by ``--help`` any more."""
    code = (
        "from looptap.cassettes.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
    )
    mods = _modules(code)
    grown = ("pathlib", "urllib", "ipaddress", "ntpath", "importlib.util")
    assert _loaded(mods, (*grown, "looptap.cassettes.untrusted")) == []


def test_the_command_line_does_not_collect_garbage_at_exit(tmp_path: Path) -> None:
    """At the interpreter's exit the collector walked every object ``looptap show`` left (modules,
    validators, the run): a quarter of a small show's CPU time. ``main`` freezes the heap at exit
    (``gc.freeze`` from ``atexit``), after which the collector has nothing to walk. An exit handler
    registered before ``main`` runs after its own and sees the frozen heap."""
    path = _run(tmp_path / "chat.jsonl", tools=False)
    code = (
        "import atexit, gc, os\n"
        "atexit.register(lambda: os.write(2, f'FROZEN {gc.get_freeze_count()}\\n'.encode()))\n"
        "real = os.dup(1); os.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n"
        "from looptap.cassettes.cli import main\n"
        f"main(['show', {str(path)!r}])\n"
        "main(['show', '--json', " + repr(str(path)) + "])\n"
    )
    err = progress.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[1]
    ).stderr
    frozen = [int(line.split()[1]) for line in err.splitlines() if line.startswith("FROZEN ")]
    assert len(frozen) == 1 and frozen[0] > 10_000, err


def test_show_imports_with_the_collector_paused_and_freezes_what_it_imported(
    tmp_path: Path,
) -> None:
    """``show`` imports its modules (the run's reader, the analysis, the views, every provider
    adapter) with the cyclic collector paused, then freezes them (``cli.loading``): no collection
    walks them while they are built, and none after (they are out of ``gc.get_objects()``)."""
    path = _run(tmp_path / "chat.jsonl", tools=False)
    code = (
        "import gc, os, sys\n"
        "during = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and "
        "during.append('looptap.cassettes.reading._run' in sys.modules and "
        "'looptap.cassettes.providers.mcp' not in sys.modules))\n"
        "real = os.dup(1); os.dup2(os.open(os.devnull, os.O_WRONLY), 1)\nfrom "
        f"looptap.cassettes.cli import main\nmain(['show', {str(path)!r}])\n"
        "import looptap.cassettes.providers.mcp as adapter, looptap.cassettes.analysis as analysis\n"  # noqa: E501
        "tracked = {id(o) for o in gc.get_objects()}\n"
        "os.write(real, f'{sum(during)} {len(during)} {gc.get_freeze_count()} {id(adapter.Mcp) in "
        "tracked} {id(analysis.RunAnalyser) in tracked}'.encode())\n"
    )
    out = progress.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[1],
    ).stdout
    while_importing, collections, frozen, adapter_tracked, analyser_tracked = out.split()
    assert int(collections) > 0  # the collector did run, before and after
    assert int(while_importing) == 0, out
    assert int(frozen) > 10_000 and adapter_tracked == "False" and analyser_tracked == "False", out


#: mitmproxy's default addons the recorder does not run, and what only they import: the onboarding
#: app's web framework, proxy auth's password hashes and LDAP client.
UNUSED_ADDONS = (
    "mitmproxy.addons.onboarding",
    "mitmproxy.addons.proxyauth",
    "mitmproxy.addons.clientplayback",
    "flask",
    "passlib",
    "ldap3",
)


#: What only a fork (``--from``) or an injected fault (``--fault``) uses: the fork's modules, its
#: cursor and replay plan, the live fault injector, and the matcher they all import (with the
#: recording's indexed reader). A plain ``looptap run`` imported them all at start-up: 34 modules,
#: about 0.1 s of CPU a run (bench/startup.py, docs/recorder.md).
FORK_OR_FAULT = (
    "looptap.cassettes.replay.forking",
    "looptap.cassettes.replay.serving",
    "looptap.cassettes.matching",
    "looptap.proxy.faults",
)


def _recording_modules(tmp_path: Path, *flags: str) -> set[str]:
    """The modules of a ``looptap run`` (in process, in the recorder's environment: the listeners
    up, ``true`` run, the cassette written and summed up) with ``flags``; it must succeed."""
    out = tmp_path / "run.jsonl"
    _, printed = _modules_and_output(
        "import sys\n"
        "from looptap.cassettes.cli import main\n"
        f"rc = main(['run', '-o', {str(out)!r}, '--force', '--confdir', "
        f"{str(tmp_path / 'conf')!r}, *{list(flags)!r}, '--', 'true'])\n"
        "print(' '.join(sorted(sys.modules)))\n"
        "import mitmproxy.addons\n"
        "print(rc, len(mitmproxy.addons.default_addons()))",
        python=str(PROXY_PYTHON),
    )
    loaded, last = printed.splitlines()
    assert last.split() == ["0", "31"] and out.exists(), printed[-2000:]
    return set(loaded.split())


@needs_recorder
def test_a_recording_loads_none_of_mitmproxys_addons_it_does_not_run(tmp_path: Path) -> None:
    """``looptap run`` imports the four addons it runs, not the package's 31 defaults
    (proxy/cli.py); the package's own names still load on reading (what a stock ``mitmdump``
    reads: ``default_addons``). Nor, without ``--from`` or ``--fault``, the fork's modules, the
    fault injector or the matcher (its ``--upstream`` is read without the fork's cursor)."""
    mods = _recording_modules(tmp_path, "--upstream", "openai=http://127.0.0.1:9")
    assert {"mitmproxy.addons.proxyserver", "mitmproxy.addons.tlsconfig"} <= mods
    assert _loaded(mods, UNUSED_ADDONS) == []
    assert "looptap.proxy.summary" in mods  # it did sum the run up
    assert _loaded(mods, FORK_OR_FAULT) == [], _loaded(mods, FORK_OR_FAULT)


@needs_recorder
def test_a_recording_with_a_fault_loads_the_fault_injector(tmp_path: Path) -> None:
    """The twin: ``--fault`` loads the injector (and the matcher it keys requests with); still
    no fork."""
    mods = _recording_modules(tmp_path, "--fault", "request=1:overloaded")
    assert {"looptap.proxy.faults", "looptap.cassettes.matching"} <= mods
    assert _loaded(mods, ("looptap.cassettes.replay.forking",)) == []


#: What the recorder's writer process never uses: the matcher and what it imports (the indexed
#: reader, the parser), the analysis, the fork. It writes the header's working directory and home
#: (cassettes/places.py) and stores round trips; importing the matcher for those two paths cost
#: 126 modules and about 0.11 s of CPU a writer.
NOT_WRITING = (
    "looptap.cassettes.matching",
    "looptap.cassettes.reading",
    "looptap.cassettes.parsing",
    "looptap.cassettes.analysis",
    "looptap.cassettes.replay",
    "mitmproxy",
)


def test_the_writer_process_loads_no_matcher_nor_reader(tmp_path: Path) -> None:
    """The writer's own work (:func:`proxy.writer.writer_main` in a fresh interpreter, its pipes
    plain ones): the header with this process's places, a round trip stored, the end of its pipe.
    It imports none of :data:`NOT_WRITING` (the provider adapters, and pydantic with their models,
    do load: a round trip is stored by its API family)."""
    out = tmp_path / "w.jsonl"
    chat = _exchange([{"role": "user", "content": "hi"}], {"content": "hello"}, tools=False)
    mods, printed = _modules_and_output(
        "import os, pickle\n"
        "from looptap.proxy.pipe import frame, write_parts\n"
        "from looptap.proxy.writer import writer_main\n"
        "class End:\n    def __init__(self, fd): self.fd = fd\n"
        "    def fileno(self): return self.fd\n"
        "ir, iw = os.pipe(); ar, aw = os.pipe()\n"
        f"parts = frame(pickle.loads({pickle.dumps(chat)!r}))\n"
        "while parts:\n    parts = write_parts(iw, parts)\n"
        "os.close(iw)\n"
        f"writer_main({str(out)!r}, False, End(ir), End(aw))\n"
        "print(os.read(ar, 4096))"
    )
    assert b"ready" in printed.encode() and b"ok" in printed.encode(), printed
    header, *rest = out.read_text().splitlines()
    assert orjson.loads(header)["meta"]["cwd"] == str(Path(__file__).parents[1]), header
    assert any(orjson.loads(line)["type"] == "exchange" for line in rest), rest[:2]
    assert "looptap.cassettes.recording.pipeline" in mods
    assert _loaded(mods, NOT_WRITING) == [], _loaded(mods, NOT_WRITING)


def test_looptap_run_hands_over_to_the_recorder_before_the_fork_and_the_analysis() -> None:
    """Where mitmproxy is not installed (the SDK side's environment: ``looptap run`` hands the
    command to the recorder's interpreter), the handler's module loads neither the fork's modules
    nor the analysis (the run's summary's) before it hands over."""
    mods = _modules("import looptap.proxy.cli as c\nassert not c.MITMPROXY")
    assert _loaded(mods, ("mitmproxy",)) == []
    assert (
        _loaded(
            mods,
            (
                "looptap.cassettes.analysis",
                "looptap.cassettes.replay.forking.fork",
                "looptap.cassettes.replay.forking.repeat",
                "looptap.proxy.summary",
            ),
        )
        == []
    )
