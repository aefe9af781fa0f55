"""Issue 83 item 5e: the texts common agent frameworks send as a failed tool's result are read as
tool errors (``C.tool_result_error``; ``E.ignored_tool_error`` when the model then claims success),
in every API family.

Each text is what the framework itself makes, at the version pinned in its environment
(``TEXTS``); ``test_the_texts_are_the_frameworks_own`` makes them again with the frameworks
(openai-agents and pydantic-ai in this environment; LangChain and smolagents in the clients'
environment, CrewAI in its own) so a framework that changes its words fails here, not silently.
The openai-agents texts of its older releases (0.3.3 to 0.10.0) are from their wheels' ``tool.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from scenarios import FAMILIES, Call, Script

from looptap.cassettes.analysis import RunAnalysis

#: (framework and version, what it sends as the failed tool's result).
TEXTS: dict[str, str] = {
    # agents.tool.default_tool_error_function, openai-agents 0.24.0 (no detail)
    "openai-agents 0.24.0": "An error occurred while running the tool. Please try again.",
    # the same function in openai-agents 0.3.3, 0.6.0 and 0.10.0
    "openai-agents 0.10.0": "An error occurred while running the tool. Please try again. "
    "Error: station PAR-7 is offline",
    # openai-agents 0.10.0, arguments that are not JSON
    "openai-agents 0.10.0 (arguments)": "An error occurred while parsing tool arguments. Please "
    "try again with valid JSON. Error: Expecting ',' delimiter: line 1 column 17 (char 16)",
    # agents.tool.default_tool_timeout_error_message, openai-agents 0.24.0
    "openai-agents 0.24.0 (timeout)": "Tool 'get_weather' timed out after 2.5 seconds.",
    # RetryPromptPart.model_response() of a tool that raised ModelRetry: pydantic-ai 1.0.0 (the
    # path of every retry then) to 2.68.0 (deprecated there: a retry is a ToolReturnPart sent as
    # {"error": …}, read by its opening)
    "pydantic-ai 2.68.0 (ModelRetry)": "station PAR-7 is offline\n\nFix the errors and try again.",
    # the same, for arguments its schema refused (1.0.0 wrote "1 validation errors: [...]")
    "pydantic-ai 2.68.0 (validation)": '1 validation error:\n```json\n[\n  {\n    "type": '
    '"missing",\n    "loc": [\n      "city"\n    ],\n    "msg": "Field required",\n    '
    '"input": {}\n  }\n]\n```\n\nFix the errors and try again.',
    # langchain_core.tools.base._handle_tool_error, handle_tool_error=True, ToolException()
    "langchain-core 1.7.2 (tool error)": "Tool execution error",
    # _handle_validation_error, handle_validation_error=True
    "langchain-core 1.7.2 (validation)": "Tool input validation error",
    # crewai/translations/en.json errors.tool_usage_error, CrewAI 1.15.30
    "crewai 1.15.30 (tool_usage_error)": "I encountered an error: station PAR-7 is offline",
    # errors.tool_usage_exception, as ToolUsage sends it (a newline first)
    "crewai 1.15.30 (tool_usage_exception)": "\nI encountered an error while trying to use the "
    "tool. This was the error: station PAR-7 is offline.\n Tool get_weather accepts these "
    "inputs: city: str.",
    # errors.wrong_tool_name
    "crewai 1.15.30 (wrong_tool_name)": "You tried to use the tool get_wether, but it doesn't "
    "exist. You must use one of the following tools, use one at time: get_weather.",
    # smolagents 1.26.0 ActionStep.to_messages, a step whose tool failed
    "smolagents 1.26.0": "Call id: call_1\nError:\nError executing tool 'get_weather' with "
    "arguments {'city': 'Paris'}: ValueError: station PAR-7 is offline\nPlease try again or use "
    "another tool\nNow let's retry: take care not to repeat previous errors! If you have retried "
    "several times, try a completely different approach.\n",
}


def _run(family: str, text: str, answer: str) -> RunAnalysis:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results(text)
    s.reply(answer)
    return s.analyse()


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("framework", sorted(TEXTS))
def test_a_frameworks_tool_failure_text_is_a_tool_error(family: str, framework: str) -> None:
    """Was: no finding for the texts that do not open with "Error" (all but smolagents' own
    tool error, which its "Call id:" line hid too)."""
    run = _run(family, TEXTS[framework], "Done: the weather has been checked successfully.")
    codes = [(f.code, f.seq) for f in run.findings]
    assert ("C.tool_result_error", 1) in codes, codes
    assert ("E.ignored_tool_error", 1) in codes, codes


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "text",
    [
        # twins: results that speak of errors or retries without being one
        "An error rate of 2% is normal for this station; it is sunny, 21 C.",
        "Sunny, 21 C. Tool execution error counts: 0.",
        "I encountered no problems: sunny, 21 C.",
        "Fix the errors and try again. (the station's motto) Sunny, 21 C.",
        "Call id: call_1\nObservation:\nSunny, 21 C.",
    ],
)
def test_twin_results_that_only_mention_errors_are_not_errors(family: str, text: str) -> None:
    run = _run(family, text, "It is sunny, 21 C.")
    assert not [f for f in run.findings if f.code == "C.tool_result_error"]


#: Made by the frameworks of the clients' environment (LangChain, smolagents) and CrewAI's.
_CLIENTS = r"""
import json
from langchain_core.tools import ToolException, tool
from pydantic import BaseModel

@tool
def failing(city: str) -> str:
    "The weather."
    raise ToolException()

class Args(BaseModel):
    city: str

@tool(args_schema=Args)
def strict(city: str) -> str:
    "The weather."
    return city

failing.handle_tool_error = True
strict.handle_validation_error = True

from smolagents.memory import ActionStep, ToolCall
from smolagents.monitoring import Timing
from smolagents.utils import AgentToolExecutionError
from smolagents.monitoring import AgentLogger, LogLevel
err = AgentToolExecutionError(
    "Error executing tool 'get_weather' with arguments {'city': 'Paris'}: ValueError: station "
    "PAR-7 is offline\nPlease try again or use another tool", AgentLogger(LogLevel.OFF))
step = ActionStep(step_number=1, timing=Timing(start_time=0.0), error=err,
                  tool_calls=[ToolCall(name="get_weather", arguments={}, id="call_1")])
print(json.dumps({
    "langchain-core 1.7.2 (tool error)": failing.invoke({"city": "Paris"}),
    "langchain-core 1.7.2 (validation)": strict.invoke({}),
    "smolagents 1.26.0": step.to_messages()[-1].content[0]["text"],
}))
"""

_CREWAI = r"""
import importlib.util, json, pathlib
# CrewAI's own table of texts (I18N_DEFAULT reads it), without importing CrewAI (seconds)
(root,) = importlib.util.find_spec("crewai").submodule_search_locations
errors = json.loads((pathlib.Path(root) / "translations" / "en.json").read_text())["errors"]
print(json.dumps({
    "crewai 1.15.30 (tool_usage_error)": errors["tool_usage_error"].format(
        error="station PAR-7 is offline"),
    "crewai 1.15.30 (tool_usage_exception)": "\n" + errors["tool_usage_exception"].format(
        error="station PAR-7 is offline", tool="get_weather", tool_inputs="city: str") + ".",
    "crewai 1.15.30 (wrong_tool_name)": errors["wrong_tool_name"].format(
        tool="get_wether", tools="get_weather"),
}))
"""


def _made_by(python: str, code: str) -> dict[str, str]:
    exe = Path(python)
    if not exe.exists():
        pytest.skip(f"no environment at {exe} (bash .ci/run makes it)")
    env = {**os.environ, "CREWAI_TRACING_ENABLED": "false", "OTEL_SDK_DISABLED": "true"}
    proc = subprocess.run(
        [str(exe), "-c", code], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return got


def test_the_texts_are_the_frameworks_own() -> None:
    from agents.tool import default_tool_error_function, default_tool_timeout_error_message
    from pydantic_ai.messages import RetryPromptPart

    warnings.simplefilter("ignore")  # (RetryPromptPart is deprecated in pydantic-ai 2.68.0)
    made = {
        "openai-agents 0.24.0": default_tool_error_function(None, ValueError("x")),  # type: ignore[arg-type]
        "openai-agents 0.24.0 (timeout)": default_tool_timeout_error_message(
            tool_name="get_weather", timeout_seconds=2.5
        ),
        "pydantic-ai 2.68.0 (ModelRetry)": RetryPromptPart(
            content="station PAR-7 is offline", tool_name="get_weather"
        ).model_response(),
        "pydantic-ai 2.68.0 (validation)": RetryPromptPart(
            content=[{"type": "missing", "loc": ("city",), "msg": "Field required", "input": {}}],  # type: ignore[list-item]
            tool_name="get_weather",
        ).model_response(),
    }
    here = Path(sys.executable).parents[2]
    clients = os.environ.get("LOOPTAP_CLIENTS_PYTHON", str(here / ".venv-clients/bin/python"))
    crewai = os.environ.get("LOOPTAP_CREWAI_PYTHON", str(here / ".venv-crewai/bin/python"))
    made.update(_made_by(clients, _CLIENTS))
    made.update(_made_by(crewai, _CREWAI))
    for name, text in made.items():
        assert text == TEXTS[name], (name, text)
