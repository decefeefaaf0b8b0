"""`loratui mcp [--allow-control]`: a stdio MCP server for coding agents (the official `mcp` SDK).

Read tools answer with what the app shows (commands/agent_view.py). Control tools act through the same
control channel as the keys and `loratui pause/stop`, recorded in the run's log with source "agent"; they
refuse unless the server was started with --allow-control. A destructive action (stop, apply-and-restart)
takes two calls: the first says what would happen and returns a one-time token, the second does it.
Secrets never leave: alert URLs live outside run directories and nothing here reads the environment.
"""

from __future__ import annotations

import argparse
import secrets
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SOURCE = "agent"
"""What the run's log records as the origin of an agent's command (events.Control.source)."""
TOKEN_TTL_S = 300.0


def register(sub: Any, runs_dir_parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `mcp` subparser."""
    cmd = sub.add_parser("mcp", parents=[runs_dir_parent],
                         help="serve the runs to a coding agent over MCP (stdio); needs loratui[mcp]")
    cmd.add_argument("--allow-control", action="store_true",
                     help="let the agent pause, resume, save, suspend, stop and apply advice (off by default)")
    return cmd


@dataclass(frozen=True)
class Pending:
    """A destructive action announced to the agent, waiting for its token."""

    action: str
    run_id: str
    advice_id: str
    expires: float


class Tokens:
    """One-time tokens for destructive actions: each names one action on one run and is used once."""

    def __init__(self) -> None:
        self._pending: dict[str, Pending] = {}

    def issue(self, action: str, run_id: str, advice_id: str = "") -> str:
        token = secrets.token_urlsafe(16)
        self._pending[token] = Pending(action, run_id, advice_id, time.monotonic() + TOKEN_TTL_S)
        return token

    def redeem(self, token: str, action: str, run_id: str, advice_id: str = "") -> None:
        """Consume `token`; raise ValueError unless it was issued for exactly this action and still holds. A token
        shown with another action or run stays good for its own (trial 14: an agent told "issued for stop on A"
        then got "unknown or expired token" for stop on A)."""
        pending = self._pending.pop(token, None)
        if pending is None or pending.expires < time.monotonic():
            raise ValueError("unknown or expired token: call again without a token to get a new one")
        if (pending.action, pending.run_id, pending.advice_id) != (action, run_id, advice_id):
            self._pending[token] = pending
            raise ValueError(f"this token was issued for {pending.action} on {pending.run_id}, not for "
                             f"{action} on {run_id} (it still holds for that)")


def build_server(runs_dir: Path, allow_control: bool) -> Any:
    """The MCP server object with every tool registered (tests may drive it in-process too)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from loratui.commands import agent_view as view
    from loratui.errors import UsageError
    from loratui.recipe import RecipeError

    class Server(MCPServer):  # type: ignore[misc]
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            """An argument of the wrong type answers one line (which argument, what it takes), not the SDK's
            pydantic dump with its errors.pydantic.dev link (trial 14: `run_output(lines="many")`)."""
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                # pydantic's ValidationError, named rather than imported: pydantic comes with the SDK, not with us
                if type(exc.__cause__).__name__ != "ValidationError" or not hasattr(exc.__cause__, "errors"):
                    raise
                schema = self._tool_input_schema(name) or {}
                raise ToolError(argument_error(name, exc.__cause__, schema, list(arguments))) from exc.__cause__

    server = Server("loratui", instructions=(
        "loratui runs and watches LoRA/QLoRA fine-tuning jobs. list_runs first; then run_status, "
        "run_advice, run_summary, run_output for one run. Control tools need `loratui mcp --allow-control`; "
        "stop and apply_advice take two calls (the first returns what would happen and a token)."))
    tokens = Tokens()

    def tool(fn: Any) -> Any:
        """A tool whose description is its docstring on one line: the source's indentation went to the agent
        ("peak against the\\n        VRAM warning line")."""
        return server.tool(description=" ".join((fn.__doc__ or "").split()))(fn)

    def guarded(fn: Any) -> Any:
        """Bad input becomes one tool error line, as the CLI prints it."""
        try:
            return fn()
        except (UsageError, RecipeError, ValueError, OSError) as exc:
            raise ToolError(str(exc)) from None

    def need_control(action: str) -> None:
        if not allow_control:
            raise ToolError(f"{action}: control is off; the user must start the server with "
                            "`loratui mcp --allow-control`")

    @tool
    def list_runs() -> dict[str, Any]:
        """The runs `loratui ls` lists: id, state, step, last loss, peak VRAM (GiB), who still runs it."""
        from loratui.rundir import where

        runs = guarded(lambda: view.list_runs(runs_dir))
        # none: say where it looked, as `ls` does (a mistyped --runs-dir read as an empty one)
        return {"runs": runs} if runs else {"runs": [], "note": f"no runs in {where(runs_dir, False)}"}

    @tool
    def run_status(run: str) -> dict[str, Any]:
        """One run's status: step, loss, tokens/s, ETA, device and torch memory (GiB), peak against the
        VRAM warning line, phase, estimate, end; reason: why it is paused (and who asked) or its state's reason."""
        return guarded(lambda: view.status(view.find_run(run, runs_dir)))

    @tool
    def run_advice(run: str) -> dict[str, Any]:
        """The troubleshooting advice for a run, most important first: what is wrong, its evidence, the
        change it proposes, and whether apply_advice can apply it."""
        return {"advice": guarded(lambda: view.advice(view.find_run(run, runs_dir)))}

    @tool
    def run_summary(run: str) -> dict[str, Any]:
        """A run's summary (losses, NaN steps, peaks, duration, end, diagnoses): replay --summary."""
        return guarded(lambda: view.summary(view.find_run(run, runs_dir)))

    @tool
    def run_output(run: str, lines: int = 50) -> dict[str, Any]:
        """The last lines (at most 200) of the trainer's output, with control characters made inert."""
        return {"lines": guarded(lambda: view.output_tail(view.find_run(run, runs_dir), lines))}

    @tool
    def estimate(recipe: str, gpu_gb: float = 80.0) -> dict[str, Any]:
        """The pre-flight VRAM estimate of a built-in recipe (by name, e.g. qwen7b) or of a run's recipe
        (by run id) on a card of gpu_gb GiB."""
        return guarded(lambda: view.estimate(recipe, gpu_gb, runs_dir))

    @tool
    def doctor(text: str) -> dict[str, Any]:
        """Diagnose pasted training output (a log, a traceback, printed loss dicts): loratui doctor -. An item's
        step is the one the text gives, or null."""
        return guarded(lambda: view.doctor(text))

    for action, doc in (("pause", "Pause a run at its next step boundary; a watched command with no Trainer is "
                                  "paused at once by SIGSTOP of its process group (needs --allow-control)."),
                        ("resume", "Resume a paused or suspended run (needs --allow-control)."),
                        ("save", "Save a checkpoint at the next step boundary (needs --allow-control)."),
                        ("suspend", "Checkpoint, free the GPU and wait for resume (needs --allow-control).")):
        server.tool(name=action, description=doc)(_control_tool(action, runs_dir, need_control, guarded))

    @tool
    def stop(run: str, token: str = "") -> dict[str, Any]:
        """Stop a run (needs --allow-control). Two calls: without a token, what would happen and a
        one-time token; with it, the stop."""
        need_control("stop")
        target = guarded(lambda: view.find_run(run, runs_dir))
        if not token:
            guarded(lambda: _can_take(target, "stop"))  # no token (nor a "would stop") for a run that ended
            now = guarded(lambda: view.status(target))
            how = guarded(lambda: view.stop_how(target))
            return {"would": f"stop {target.run_id} {how} (now {now['state']}, step "
                             f"{now['step']}/{now['max_steps']}); call stop again with this token to do it",
                    "token": tokens.issue("stop", target.run_id)}
        guarded(lambda: tokens.redeem(token, "stop", target.run_id))
        return {"done": guarded(lambda: _deliver(target, "stop"))}

    @tool
    async def apply_advice(run: str, advice_id: str, token: str = "") -> dict[str, Any]:
        """Apply an advice item (needs --allow-control): write the fixed recipe or config copy and restart
        the run with it. Two calls: without a token, the change and a one-time token; with it, the act."""
        import asyncio

        need_control("apply_advice")
        target = guarded(lambda: view.find_run(run, runs_dir))
        item = guarded(lambda: _advice_item(target, advice_id))
        if not token:
            return guarded(lambda: would_apply(target, item)) | {
                "token": tokens.issue("apply", target.run_id, advice_id)}
        guarded(lambda: tokens.redeem(token, "apply", target.run_id, advice_id))
        return await asyncio.to_thread(lambda: guarded(lambda: _apply(target, item)))  # a restart waits

    return server


_TAKES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
          "array": "a list", "object": "an object"}


def argument_error(tool: str, error: Any, schema: dict[str, Any], given: list[str] | None = None) -> str:
    """One line for a pydantic ValidationError on a tool's arguments: each argument named with the value given
    and what the tool takes (from its input schema), the rejected value shortened; a missing one with the names
    given that the tool does not take (`id` for `run`)."""
    from loratui.text import inert

    properties = schema.get("properties", {})
    said: list[str] = []
    for err in error.errors():
        name = ".".join(str(part) for part in err.get("loc", ())) or "arguments"
        kind = properties.get(str(err.get("loc", ("",))[0]), {}).get("type", "")
        takes = _TAKES.get(kind, "")
        if err.get("type") == "missing":
            said.append(f"{name}: missing; it is required" + (f", {takes}" if takes else ""))
            continue
        value = repr(err.get("input"))
        value = inert(value if len(value) <= 60 else value[:57] + "...", newlines=False)
        said.append(f"{name} = {value}: expected {takes}" if takes else f"{name} = {value}: {err.get('msg', '')}")
    takes_all = ", ".join(f"{key} ({_TAKES.get(value.get('type', ''), value.get('type', '?'))})"
                          for key, value in properties.items())
    missing = any(err.get("type") == "missing" for err in error.errors())  # perhaps named otherwise: list them
    unknown = [inert(str(name), newlines=False) for name in given or () if name not in properties]
    named = f"; it was given {', '.join(unknown)}, which it does not take" if missing and unknown else ""
    return f"{tool}: {'; '.join(said)}{named}" + (f" (it takes {takes_all})" if missing and takes_all else "")


def would_apply(run: Any, item: Any) -> dict[str, Any]:
    """What apply_advice's second call would do, with the command line a watched run would run again (from
    its run.json, what will really run), so an agent's user sees it before anything runs."""
    from loratui.text import inert

    would = (f"write a copy of {run.run_id}'s recipe/config with {item.change}, stop the run if it trains, "
             "and start it again with the copy (from its last checkpoint)")
    command = list(run.read_settings().command)
    shown = inert(shlex.join(command), newlines=False) if command else ""
    if shown:
        would += f"; the command that runs again: {shown} (its config path replaced by the copy's)"
    return {"would": would, "change": item.change, "command": shown}


def _control_tool(action: str, runs_dir: Path, need_control: Any, guarded: Any) -> Any:
    from loratui.commands import agent_view as view

    def tool(run: str) -> dict[str, Any]:
        need_control(action)
        return {"done": guarded(lambda: _deliver(view.find_run(run, runs_dir), action))}

    return tool


def _deliver(run: Any, command: str) -> str:
    from loratui.supervisor import control

    try:
        return control.deliver(run, command, SOURCE)
    except control.ControlError as exc:
        said = str(exc)  # most already name the run: "RUN: RUN is not running" said it twice
        raise ValueError(said if run.run_id in said else f"{run.run_id}: {said}") from None


def _can_take(run: Any, command: str) -> None:
    """Refuse, as `control.deliver` would, a command to a run nobody runs (a suspended one waits for it)."""
    from loratui import events, runstatus

    status = runstatus.read(run)
    if not status.alive and status.state != events.SUSPENDED:
        raise ValueError(f"{run.run_id} is not running ({status.state}); nothing to {command}")


def _advice_item(run: Any, advice_id: str) -> Any:
    """The advice named, as `loratui apply` chooses it (commands/apply.py: one choice for A's shells)."""
    from loratui.commands.apply import choose

    return choose(run, advice_id)


def _apply(run: Any, item: Any) -> dict[str, Any]:
    """What `A`, `y` does in the app (and `loratui apply --restart`), with the agent named in the log."""
    from loratui.commands.apply import restart, write
    from loratui.errors import ApplyError

    try:
        path, env = write(run, item)
        new_run = restart(run, item, path, env, SOURCE, "agent (mcp)")
    except ApplyError as exc:  # another user's run, a copied one, a change that does not validate: one line
        raise ValueError(str(exc)) from None
    return {"done": f"wrote {path}; restarted as {new_run.run_id}", "new_run": new_run.run_id}


def main(args: argparse.Namespace) -> int:
    """Serve until the client closes stdin."""
    from loratui.errors import UsageError

    try:
        import mcp  # noqa: F401
    except ImportError:
        raise UsageError("mcp needs the MCP SDK: pip install 'loratui[mcp]'") from None
    build_server(args.runs_dir, args.allow_control).run("stdio")
    return 0
