"""What the ``yiemagent`` commands share: the tool folder (or a copy of the example tools), the
agent built from the options, and waiting for a run's response with Ctrl-C as abort.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs

from yiemagent.agent._agent import YiemAgent
from yiemagent.agent._options import ContextOptions, OutputOptions, ToolOptions
from yiemagent.cli._approve import approval_policy
from yiemagent.cli._model import CliError, ModelChoice
from yiemagent.core._content import TextContent
from yiemagent.core._events import AgentEvent
from yiemagent.core._messages import AssistantMessage
from yiemagent.core._output import OUTPUT_TOOL_NAME
from yiemagent.core._usage import UsageLimits
from yiemagent.errors import ToolLoadError
from yiemagent.tools import _examples as examples
from yiemagent.tools._store import ToolStore, get_tools, is_tool_file_name, load_tools

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "Tools",
    "answer_text",
    "build_agent",
    "check_tools_folder",
    "example_tools_folder",
    "failure",
    "load_folder",
    "load_mcp",
    "open_tools",
    "problem_line",
    "shown_path",
    "shutdown_on_exit",
    "wait_for_response",
    "warn_problems",
]

DEFAULT_SYSTEM_PROMPT = "You are a concise, helpful assistant. If you cannot do something, say so."
EXAMPLE_TOOL = examples.EXAMPLE_TOOL
_LINE = re.compile(r"\bat line (\d+)\b")

Sink = Callable[[AgentEvent], None]


# ---------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------


def example_tools_folder() -> Path:
    """The example tools (see ``tools._examples``); raises ``CliError`` when they are not
    installed with this copy."""
    try:
        return examples.example_tools_folder()
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None


def shown_path(path: str | os.PathLike[str]) -> str:
    """``path`` as a person would type it: relative to the working folder when inside it."""
    text = os.fspath(path)
    try:
        relative = os.path.relpath(text)
    except ValueError:  # another drive (Windows)
        return text
    return text if relative.startswith(os.pardir) else relative


def problem_line(path: str, message: str) -> str:
    """``path:LINE: message`` when the message names the line (syntax errors and exceptions
    raised by the file do), else ``path: message``: the form editors and terminals link. The
    path is relative to the working folder when inside it."""
    match = _LINE.search(message)
    where = shown_path(path)
    return f"{where}:{match[1]}: {message}" if match else f"{where}: {message}"


def shutdown_on_exit(agent: YiemAgent) -> Callable[..., bool]:
    """An exit callback for ``ExitStack.push`` that shuts ``agent`` down: aborting its run and
    waiting for its worker, except when the command is being stopped (Ctrl-C, a termination
    signal), when nothing is waited for: a tool that ignores the abort must not keep the
    command from quitting."""

    def exit_callback(exc_type: type[BaseException] | None, *_rest: object) -> bool:
        """Shut the agent down; never swallows the exception that ends the block."""
        interrupted = exc_type is not None and not issubclass(exc_type, Exception)
        agent.shutdown(wait=not interrupted, abort=True)
        return False

    return exit_callback


def _python_files(folder: str) -> list[Path]:
    """The files of ``folder`` that loading would run (``is_tool_file_name``, regular files;
    links are never followed), or ``[]`` when it cannot be listed (loading says why)."""
    try:
        with os.scandir(folder) as entries:
            return [
                Path(e.path)
                for e in entries
                if is_tool_file_name(e.name) and e.is_file(follow_symlinks=False)
            ]
    except OSError:
        return []


def _mentions_get_tool(path: Path) -> bool:
    """Whether the file's text names ``get_tool`` (every tool file defines it); read, not run."""
    try:
        return b"get_tool" in path.read_bytes()
    except OSError:
        return True  # loading reports the file as unreadable, with its name


def check_tools_folder(folder: str) -> None:
    """Refuse a tool folder whose loading would run scripts that are not tool files, before
    anything runs: an empty value (``--tools "$DIR"`` with ``DIR`` unset; the path "" is the
    working folder), and a folder whose ``.py`` files are none of them a tool file (none
    names ``get_tool``: a mistyped path, a home or project folder). A folder without ``.py``
    files runs nothing and is accepted (tools from ``--mcp`` only, or none). ``CliError``
    (exit 2) saying what to give instead."""
    if not folder.strip():
        raise CliError(
            f"the tool folder's path is empty ({folder!r}; an unset variable in --tools "
            '"$DIR"?): an empty path means the working folder, and loading it would '
            "run every .py file there. Give a folder of tool files, or none for the "
            "example tools"
        )
    files = _python_files(folder)
    if not files or any(_mentions_get_tool(f) for f in files):
        return  # nothing runs, or a tool file does; a missing folder is reported by the loader
    raise CliError(
        f"tool folder {shown_path(folder)!r} holds no tool files: none of its .py "
        f"files ({len(files)}) defines get_tool(), so none was run. Give the folder "
        "your tool files (.py files defining get_tool()) are in, or none for the "
        "example tools"
    )


def load_folder(store: ToolStore, folder: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """Load ``folder`` into ``store``; return the problems of the files that did not load (the
    good ones are loaded anyway). ``CliError`` when ``folder`` is not a folder."""
    try:
        load_tools(store, folder)
    except ToolLoadError as exc:
        return exc.problems
    except NotADirectoryError as exc:
        raise CliError(f"{exc}; give a folder of tool files (.py)") from None
    return []


@attrs.define
class Tools:
    """The agent's tool store and where its tools came from: ``label`` (for the banner), the
    files that did not load, and the MCP server each MCP tool came from (by tool name)."""

    store: ToolStore
    label: str
    problems: list[tuple[str, str]]
    servers: dict[str, str] = attrs.field(factory=dict)

    def origin(self, name: str) -> str:
        """Where tool ``name`` comes from: its file, ``MCP server <command or URL>``, or
        ``built in`` (``listTools``, which the loader registers itself)."""
        source = self.store.source_of(name)
        if source:
            return os.path.basename(source)
        server = self.servers.get(name)
        return f"MCP server {server}" if server is not None else "built in"


@contextlib.contextmanager
def open_tools(
    folder: str | None, mcp_servers: Sequence[str] = (), allow_write_tool: bool = False
) -> Iterator[Tools]:
    """Load the tools for an agent: ``folder``, or a temporary copy of the example tools, plus
    the tools of each MCP server in ``mcp_servers`` (a command line or a URL).

    Of the example tools, ``writeTool`` (which writes and runs code the model wrote) is copied
    only with ``allow_write_tool``; a ``folder`` the user names is loaded as it is. The copy
    keeps ``writeTool`` from writing into the installed package (or the checkout); tools the
    model writes there are gone when the command ends, which ``--tools DIR`` avoids. Problems of
    files that did not load are returned for the command to report. The MCP connections close
    (their servers stop) when the block ends; a server that cannot be reached raises
    ``CliError`` naming it.
    """
    with ToolStore("cli") as store:
        if folder is not None:
            check_tools_folder(folder)
            problems = load_folder(store, folder)
            servers = load_mcp(store, mcp_servers)
            yield Tools(store, folder, problems, servers)
            return
        source = example_tools_folder()
        with tempfile.TemporaryDirectory(prefix="yiemagent-tools-") as copy:
            for path in sorted(source.glob("*.py")):
                if path.name != EXAMPLE_TOOL or allow_write_tool:
                    shutil.copy2(path, copy)
            problems = load_folder(store, copy)
            servers = load_mcp(store, mcp_servers)
            yield Tools(store, "the example tools (a temporary copy)", problems, servers)


def load_mcp(store: ToolStore, servers: Sequence[str]) -> dict[str, str]:
    """Register the tools of each MCP server (the SDK is imported only when one is given);
    return the server each registered tool came from, by tool name."""
    origins: dict[str, str] = {}
    if not servers:
        return origins
    try:
        from yiemagent.tools.mcp._connection import load_mcp_tools
    except ImportError as exc:
        raise CliError(f"--mcp needs the MCP SDK: pip install 'yiemagent[mcp]' ({exc})") from None
    for server in servers:
        try:
            connection = load_mcp_tools(store, server)
        except Exception as exc:  # the command reports it; the store closes what did connect
            raise CliError(f"MCP server {server!r}: {exc}") from None
        origins.update(dict.fromkeys(connection.tool_names, server))
    return origins


def warn_problems(problems: Sequence[tuple[str, str]], err: TextIO) -> None:
    """Warn on ``err`` about each tool file that did not load (``path:LINE: message``)."""
    for path, message in problems:
        err.write(f"warning: not loaded: {problem_line(path, message)}\n")
    if problems:
        err.write("warning: `yiemagent tools --check FOLDER` lists the problems of a folder\n")


# ---------------------------------------------------------------------------------------------
# Agents and answers
# ---------------------------------------------------------------------------------------------


def build_agent(
    args: argparse.Namespace,
    choice: ModelChoice,
    store: ToolStore,
    sinks: Sequence[Sink],
) -> YiemAgent:
    """An agent for ``chat``/``run``: the model, the store's tools (followed as the model adds
    some with writeTool), the options, and ``sinks`` subscribed in order. Calls of a tool that
    writes and runs code wait for approval, and with ``--approve`` every call does
    (``approval_policy``; the command asks, see ``settle_approvals``)."""
    agent = YiemAgent(
        llm_call=choice.llm_call,
        tools=get_tools(store),
        tool_store=store,
        system_prompt=args.system if args.system is not None else DEFAULT_SYSTEM_PROMPT,
        tool_options=ToolOptions(execution="parallel" if args.parallel else "sequential"),
        max_turns=args.max_turns,
        # The output tool runs nothing: giving the answer never waits for a decision.
        needs_approval=approval_policy(args.approve, never=(OUTPUT_TOOL_NAME,)),
        **output_options(args, choice),
        **budget_options(args),
    )
    for sink in sinks:
        agent.subscribe(sink)
    return agent


def output_options(args: argparse.Namespace, choice: ModelChoice) -> dict[str, Any]:
    """The agent's output settings from ``run --schema`` (none for ``chat``): the schema read
    already, and the mode given, else ``grammar`` on the embedded model (its tool choice goes
    by the question's words, which a final-answer tool shares with no question), else
    ``tool``."""
    schema = getattr(args, "schema_data", None)
    if schema is None:
        return {}
    mode: Any = getattr(args, "output_mode", None)
    if mode is None:
        mode = "grammar" if choice.spec.split(":", 1)[0] == "local" else "tool"
    return {"output": OutputOptions(schema, mode=mode)}


def budget_options(args: argparse.Namespace) -> dict[str, Any]:
    """The agent's usage limits and context window from ``--max-llm-calls``,
    ``--max-total-tokens``, ``--context-window`` and ``--context-strategy``."""
    strategy = getattr(args, "context_strategy", "error")
    options: dict[str, Any] = {
        "context": ContextOptions(window=getattr(args, "context_window", None), strategy=strategy)
    }
    calls, tokens = getattr(args, "max_llm_calls", None), getattr(args, "max_total_tokens", None)
    if calls is not None or tokens is not None:
        options["usage_limits"] = UsageLimits(max_llm_calls=calls, max_total_tokens=tokens)
    return options


def wait_for_response(agent: YiemAgent, on_abort: Callable[[], None]) -> AssistantMessage:
    """The response of the agent's run. Ctrl-C aborts the run (``on_abort`` tells the user) and
    keeps waiting for its (aborted) response; a second Ctrl-C raises ``KeyboardInterrupt``."""
    aborting = False
    while True:
        try:
            return agent.take_response()
        except KeyboardInterrupt:
            if aborting:
                raise
            aborting = True
            agent.abort()
            on_abort()


def answer_text(message: AssistantMessage) -> str:
    """The text blocks of a reply, joined."""
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


def failure(message: AssistantMessage, max_turns: int) -> str | None:
    """Why a response is not an answer, for the user: for the stop reasons ``"error"``,
    ``"aborted"`` and ``"max_turns"`` (the commands exit 1 then); ``None`` for an answer."""
    if message.stop_reason == "error":
        return f"error: {message.error_message or 'the run failed'}"
    if message.stop_reason == "aborted":
        return "aborted"
    if message.stop_reason == "awaiting_approval":  # settle_approvals asks until none waits
        return "stopped: tool calls are still waiting for approval"
    if message.stop_reason == "max_turns":
        return f"stopped: no answer within {max_turns} turns (--max-turns); the model kept calling tools"
    if message.stop_reason in ("usage_limit", "context_overflow"):
        why = message.error_message or message.stop_reason
        if message.stop_reason == "context_overflow":  # its advice names the library's settings
            why += " (from the command line: --context-strategy trim leaves the oldest turns out)"
        return why if why.lower().startswith("stopped") else f"stopped: {why}"
    return None
