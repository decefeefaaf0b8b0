"""An agent's bad argument gets one clear refusal naming the argument as the tool takes it (trial 10, through
the `mcp` client: `run_output(lines=-5)` and `lines=0` answered one line as if asked for it)."""
from __future__ import annotations

from pathlib import Path

import pytest

from loratui import events
from loratui.commands import agent_view
from loratui.errors import UsageError
from loratui.rundir import RunDir
from tests.conftest import write_run


def _run(path: Path) -> RunDir:
    return write_run(path, [events.Header(t=1.0, schema=1, run_id=path.name, recipe_hash="h", name="r"),  # type: ignore[no-any-return]
                            events.Output(t=2.0, stream="stdout", lines=[f"line {i}" for i in range(10)])])


@pytest.mark.parametrize("lines", [0, -5])
def test_run_output_refuses_a_count_below_one(tmp_path: Path, lines: int) -> None:
    run = _run(tmp_path / "runs" / "r1")
    with pytest.raises(UsageError, match=rf"^lines = {lines}: .*1 to 200"):
        agent_view.output_tail(run, lines)
    assert agent_view.output_tail(run, 3) == ["line 7", "line 8", "line 9"]
    assert len(agent_view.output_tail(run, 500)) == 10  # above 200: the most there is, as its doc says


@pytest.mark.parametrize("gpu_gb", [-1.0, 0.0, float("nan")])
def test_estimate_names_the_tools_own_argument(tmp_path: Path, gpu_gb: float) -> None:
    """The agent passed `gpu_gb`; it was told about `--gpu-gb`, a flag it has no way to give."""
    with pytest.raises(UsageError, match=r"^gpu_gb = (-1\.0|0\.0|nan): .*positive number of GiB") as caught:
        agent_view.estimate("tiny", gpu_gb, tmp_path)
    assert "--gpu-gb" not in str(caught.value)


def test_estimate_of_an_unknown_name_lists_the_built_in_recipes_too(tmp_path: Path) -> None:
    """`estimate(recipe="nosuch")` said only "no run named 'nosuch'": the tool takes a built-in recipe's name
    first, and the agent was not told which exist."""
    with pytest.raises(UsageError) as caught:
        agent_view.estimate("nosuch", 80.0, tmp_path)
    said = str(caught.value)
    assert "'nosuch'" in said and "built-in recipe" in said and "tiny" in said and "qwen7b" in said, said
    assert "list_runs" in said, said


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_run_name_is_called_empty(tmp_path: Path, name: str) -> None:
    """Trial 14, `run_status(run="")` through the `mcp` client: "'': name a run by its id (list_runs gives them),
    not by a path" (an empty name is no path)."""
    _run(tmp_path / "runs" / "r1")
    with pytest.raises(UsageError, match=r"^run: empty; name a run by its id \(list_runs gives them\)$"):
        agent_view.find_run(name, tmp_path / "runs")


async def test_list_runs_of_a_runs_dir_that_does_not_exist_says_so(tmp_path: Path) -> None:
    """Trial 14: `loratui mcp --runs-dir /nonexistent/runs` answered list_runs with `{"runs": []}`, where `ls`
    says "no runs in /nonexistent/runs/ (no such directory)": the agent took a mistyped folder for no runs."""
    pytest.importorskip("mcp")
    from loratui.commands.mcp_server import build_server

    server = build_server(tmp_path / "nonexistent" / "runs", allow_control=False)
    result = await server.call_tool("list_runs", {})
    text = "".join(getattr(part, "text", "") for part in result.content)
    assert '"runs": []' in text and f"no runs in {tmp_path}/nonexistent/runs/ (no such directory)" in text, text
    _run(tmp_path / "runs" / "r1")
    result = await build_server(tmp_path / "runs", allow_control=False).call_tool("list_runs", {})
    assert "note" not in "".join(getattr(part, "text", "") for part in result.content)


async def test_the_tools_descriptions_carry_no_source_indentation(tmp_path: Path) -> None:
    """Trial 14, list_tools through the `mcp` client: run_status's description read "peak against the\\n        VRAM
    warning line" (its docstring's indentation)."""
    pytest.importorskip("mcp")
    from loratui.commands.mcp_server import build_server

    tools = await build_server(tmp_path / "runs", allow_control=False).list_tools()
    assert len(tools) == 13
    for tool in tools:
        assert tool.description and "\n" not in tool.description and "  " not in tool.description, tool


def test_a_token_shown_for_another_run_still_holds_for_its_own() -> None:
    """Trial 14 through the `mcp` client: stop(run=B, token for A) was refused as issued for A, and then
    stop(run=A, token) answered "unknown or expired token": the mistake had spent it."""
    from loratui.commands.mcp_server import Tokens

    tokens = Tokens()
    token = tokens.issue("stop", "20261206-012740-tiny")
    with pytest.raises(ValueError, match="issued for stop on 20261206-012740-tiny, not for stop on 20261206-005826"):
        tokens.redeem(token, "stop", "20261206-005826-train")
    tokens.redeem(token, "stop", "20261206-012740-tiny")  # still good for its own run, once
    with pytest.raises(ValueError, match="unknown or expired token"):
        tokens.redeem(token, "stop", "20261206-012740-tiny")


def test_estimate_of_an_empty_recipe_names_its_own_argument(tmp_path: Path) -> None:
    """Trial 14: `estimate(recipe="  ")` answered "run: empty; name a run by its id": the tool's argument is
    `recipe`, and it takes a built-in recipe's name first."""
    with pytest.raises(UsageError, match=r"^recipe: empty; name a built-in recipe \(.*tiny.*\) or a run's id"):
        agent_view.estimate("  ", 80.0, tmp_path)


@pytest.mark.parametrize(("tool", "arguments", "said"), [
    ("run_output", {"run": "r1", "lines": "many"}, "run_output: lines = 'many': expected an integer"),
    ("estimate", {"recipe": "tiny", "gpu_gb": "big"}, "estimate: gpu_gb = 'big': expected a number"),
    ("run_status", {"run": 5}, "run_status: run = 5: expected a string"),
    ("run_status", {"name": "r1"}, ("run_status: run: missing; it is required, a string; it was given name, which "
                                    "it does not take (it takes run (a string))")),
    ("run_status", {}, "run_status: run: missing; it is required, a string (it takes run (a string))"),
    ("apply_advice", {"id": "r1", "advice_id": 7}, ("apply_advice: run: missing; it is required, a string; advice_id "
                                                    "= 7: expected a string; it was given id, which it does not take "
                                                    "(it takes run (a string), advice_id (a string), token (a string))")),
])
async def test_an_argument_of_the_wrong_type_is_named_with_what_the_tool_takes(
        tmp_path: Path, tool: str, arguments: dict[str, object], said: str) -> None:
    """Trial 14: `run_output(lines="many")` answered pydantic's dump ("1 validation error for
    run_outputArguments ... [type=int_parsing, ...] For further information visit https://errors.pydantic.dev")."""
    pytest.importorskip("mcp")
    from mcp.server.mcpserver.exceptions import ToolError

    from loratui.commands.mcp_server import build_server

    _run(tmp_path / "runs" / "r1")
    with pytest.raises(ToolError) as caught:
        await build_server(tmp_path / "runs", allow_control=False).call_tool(tool, arguments)
    assert str(caught.value) == said
    assert "pydantic" not in str(caught.value) and "\n" not in str(caught.value)
