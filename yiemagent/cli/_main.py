"""The ``yiemagent`` command (also ``python -m yiemagent``): ``chat``, ``run`` and ``tools``.

``yiemagent chat`` talks with an agent in the terminal, ``yiemagent run "PROMPT"`` answers one
prompt (the answer on stdout, tool activity on stderr, every event as JSON lines with
``--events jsonl``), ``yiemagent tools [FOLDER]`` lists or checks a folder of tool files. The
README's "The yiemagent command" section describes every option. In ``run``, stdout holds the
command's results only: what tools print goes to stderr. Exit status: 0 on an answer, 1 when
the run ended in an error, was aborted or ran out of turns, or its answer or events could not
be written (or ``tools`` found problems), 2 when the command cannot start as asked (bad options
or input, no model, a closed stdout), 130 on a second Ctrl-C, 128 + the signal's number on
SIGTERM or SIGHUP (after cleaning up, as for Ctrl-C).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from yiemagent.cli._chat import run_chat
from yiemagent.cli._io import read_prompt, reopen_closed_descriptors, stdout_to_stderr
from yiemagent.cli._model import CliError, choose_model
from yiemagent.cli._render import Renderer
from yiemagent.cli._session import (
    Sink,
    Tools,
    answer_text,
    build_agent,
    check_tools_folder,
    example_tools_folder,
    failure,
    load_folder,
    load_mcp,
    open_tools,
    problem_line,
    shown_path,
    shutdown_on_exit,
    wait_for_response,
    warn_problems,
)
from yiemagent.cli._text import printable
from yiemagent.core._messages import AssistantMessage
from yiemagent.integrations._event_log import JsonlEventWriter
from yiemagent.tools._store import ToolStore

__all__ = ["build_parser", "main"]


# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------


ABORTING = "\naborting the run (Ctrl-C again quits at once)\n"  # what Ctrl-C during a run says


def _settle_events(args: argparse.Namespace) -> bool:
    """Set ``args.events`` to ``"jsonl"`` when ``--events-file`` asks for the events, and return
    whether ``run`` writes them to stdout (``--events jsonl`` without a file, or
    ``--events-file -``); ``CliError`` for options that cannot go together."""
    if args.events_file is not None and not args.events_file.strip():
        raise CliError("--events-file is empty; give a file name, or '-' for stdout")
    if args.events_file is not None:
        args.events = "jsonl"
    to_stdout = args.events is not None and args.events_file in (None, "-")
    if to_stdout and args.json:
        raise CliError("--json and --events jsonl both write to stdout; send the events to a "
                       "file with --events-file FILE")
    return to_stdout


def _open_events_file(args: argparse.Namespace, stack: contextlib.ExitStack) -> TextIO:
    """The ``--events-file``, open for writing and closed with ``stack`` (a write error is
    reported from ``writer.broken``, not again when it closes). Opened before stdout moves,
    so that ``/dev/stdout`` still names the real one."""
    try:
        stream = open(args.events_file, "w", encoding="utf-8")  # noqa: SIM115 (closed by stack)
    except (OSError, ValueError) as exc:  # ValueError: a NUL character in the name
        raise CliError(f"--events-file {args.events_file}: cannot write it: "
                       f"{getattr(exc, 'strerror', None) or exc}") from None
    stack.callback(_close_quietly, stream)
    return stream


def _close_quietly(stream: TextIO) -> None:
    """Close ``stream``, ignoring a write error: the events writer has reported it already."""
    with contextlib.suppress(OSError):
        stream.close()


def _answer(args: argparse.Namespace, prompt: str,
            events: TextIO | None) -> tuple[AssistantMessage, JsonlEventWriter | None]:
    """Run the agent once on ``prompt`` and return its response, with the writer of the events
    to ``events`` when there is one (its ``broken`` says whether every event was written)."""
    choice = choose_model(args.model, args.base_url, stream=not args.no_stream,
                          temperature=args.temperature)
    with contextlib.ExitStack() as stack:
        stack.callback(choice.close)
        tools = stack.enter_context(open_tools(args.tools, args.mcp, args.allow_write_tool))
        warn_problems(tools.problems, sys.stderr)
        sinks: list[Sink] = []
        writer: JsonlEventWriter | None = None
        say = _write_to_stderr
        if not args.quiet:
            renderer = Renderer(sys.stderr, show_text=False, status=sys.stderr)
            sinks.append(renderer)
            say = renderer.write
        if events is not None:
            writer = JsonlEventWriter(events)
            sinks.append(writer)
        agent = build_agent(args, choice, tools.store, sinks, say)
        stack.push(shutdown_on_exit(agent))
        agent.run_agent(prompt)
        # Through the renderer: it erases the status line before the note is written.
        return wait_for_response(agent, lambda: say(ABORTING)), writer


def _write_to_stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def _deliver(args: argparse.Namespace, response: AssistantMessage, out: TextIO,
             writer: JsonlEventWriter | None, to_stdout: bool) -> None:
    """Write the answer (or ``--json``) to ``out`` and make sure it and the events got there:
    a reader of stdout that went away is ``BrokenPipeError`` (exit 1, silently, as for
    ``| head -1``); another write error is ``CliError`` (exit 1) saying where and why."""
    try:
        if args.json:
            print(json.dumps(response.to_dict(), indent=2), file=out)
        elif not to_stdout:
            text = answer_text(response)
            if text:
                print(text, file=out)
        out.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise CliError(f"the answer could not be written to stdout: {exc.strerror or exc}",
                       exit_code=1) from None
    broken = writer.broken if writer is not None else None
    if broken is None:
        return
    if to_stdout and isinstance(broken, BrokenPipeError):
        raise broken
    where = "stdout" if to_stdout else f"--events-file {args.events_file}"
    raise CliError(f"the events could not all be written to {where}: {broken.strerror or broken}",
                   exit_code=1)


def cmd_run(args: argparse.Namespace) -> int:
    """``yiemagent run PROMPT``: one run; see the module docstring for outputs and exit codes.
    Only the command's results reach stdout: whatever tools print goes to stderr."""
    prompt = read_prompt(args.prompt)
    if not prompt.strip():
        raise CliError("the prompt is empty; give it as an argument, or '-' to read it from stdin")
    to_stdout = _settle_events(args)
    with contextlib.ExitStack() as stack:
        to_file = args.events is not None and not to_stdout
        events = _open_events_file(args, stack) if to_file else None
        out = stack.enter_context(stdout_to_stderr())
        response, writer = _answer(args, prompt, out if to_stdout else events)
        _deliver(args, response, out, writer, to_stdout)
    problem = failure(response, args.max_turns) or _empty(response)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    return 0


def _empty(response: AssistantMessage) -> str | None:
    """Why an answer with no text at all is no answer for the user, or ``None`` when it has
    text (a run a tool ended with ``terminate`` counts as answered)."""
    if answer_text(response).strip() or response.stop_reason == "tool_use_terminated":
        return None
    return ("the model's reply was empty (no text, stop reason "
            f"{response.stop_reason!r}); ask again, or try another model (--model)")


def _describe_tools(store: ToolStore, as_json: bool, origin: Callable[[str], str]) -> str:
    """The store's tools for ``yiemagent tools``: each with its label, file, description and
    input schema as indented text, or (``as_json``) as a JSON list of objects. Neither holds a
    control character: the JSON escapes them, the text leaves them out (``printable``; tabs
    become spaces), so a tool's name or description cannot send escape sequences to the
    terminal."""
    tools = list(store.tools.values())
    if as_json:  # ensure_ascii: every control character is written as a \u escape
        return json.dumps([{"name": t.name, "label": t.label, "description": t.description,
                            "input_schema": t.input_schema, "parallel": t.parallel_tool_execute,
                            "file": store.source_of(t.name), "from": origin(t.name)}
                           for t in tools], indent=2)
    parts = []
    for tool in tools:
        schema = json.dumps(tool.input_schema, indent=2, ensure_ascii=False)
        lines = [*tool.description.splitlines(), "input schema:", *schema.splitlines()]
        body = "\n".join("    " + line for line in lines)
        parts.append(f"{tool.name}: {tool.label}  ({origin(tool.name)})\n{body}")
    return printable("\n\n".join(parts)).expandtabs(4)


def cmd_tools(args: argparse.Namespace) -> int:
    """``yiemagent tools [FOLDER]``: list the tools with their schemas, or ``--check`` every
    file and name each problem with its file and line (exit 1 when there is one)."""
    folder = next((f for f in (args.folder, args.tools) if f is not None), None)
    if folder is None:
        folder = example_tools_folder()
    else:
        check_tools_folder(folder)
    with ToolStore("cli-tools") as store:
        with stdout_to_stderr():  # what tool files print as they load must not mix with the list
            problems = load_folder(store, folder)
            servers = load_mcp(store, args.mcp)
        return _report_tools(args, Tools(store, shown_path(folder), problems, servers), folder)


def _report_tools(args: argparse.Namespace, tools: Tools, folder: Any) -> int:
    """``tools``' output: the problems with ``--check``, else the tools and their schemas."""
    store, problems = tools.store, tools.problems
    if args.check:
        for path, message in problems:
            print(problem_line(path, message))
        count = sum(1 for name in store.tools if store.source_of(name))
        loaded = f"{count} tool file{'' if count == 1 else 's'} loaded from {shown_path(folder)}"
        if problems:
            print(f"{len(problems)} file{'' if len(problems) == 1 else 's'} with problems; {loaded}")
            return 1
        print(f"ok: {loaded}")
        return 0
    print(_describe_tools(store, args.json, tools.origin))
    warn_problems(problems, sys.stderr)
    return 1 if problems else 0


def cmd_chat(args: argparse.Namespace) -> int:
    """``yiemagent chat``: the interactive session (see ``cli_chat``); ``CliError`` when stdin
    is closed, as there is nothing to read the messages from."""
    if sys.stdin is None:
        raise CliError("stdin is closed: yiemagent chat reads your messages from it; run it in "
                       "a terminal, or give it input (yiemagent chat < messages.txt), or use "
                       "yiemagent run PROMPT")
    choice = choose_model(args.model, args.base_url, stream=not args.no_stream,
                          temperature=args.temperature)
    with contextlib.ExitStack() as stack:
        stack.callback(choice.close)
        tools = stack.enter_context(open_tools(args.tools, args.mcp, args.allow_write_tool))
        warn_problems(tools.problems, sys.stderr)
        renderer = Renderer(sys.stdout, status=sys.stderr)
        agent = build_agent(args, choice, tools.store, [renderer], renderer.write)
        stack.push(shutdown_on_exit(agent))
        return run_chat(agent, renderer, choice, tools, args.max_turns)


# ---------------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1, else an error naming what was given."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def _temperature(text: str) -> float:
    """argparse type: a finite number from 0 to 2 (the range providers accept)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 2:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 2, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``yiemagent`` command."""
    from yiemagent import __version__

    tools_opt = argparse.ArgumentParser(add_help=False)
    tools_opt.add_argument("-v", "--verbose", action="store_true",
                           help="log what the library does on stderr, tracebacks of failing "
                                "tools included")
    tools_opt.add_argument("--tools", metavar="FOLDER",
                           help="folder of tool files (default: the example tools)")
    tools_opt.add_argument("--mcp", metavar="SERVER", action="append", default=[],
                           help="also use the tools of an MCP server: a command line run over "
                                "stdio ('uvx mcp-server-time') or an http(s) URL; repeatable")
    agent_opts = argparse.ArgumentParser(add_help=False)
    group = agent_opts.add_argument_group("model and agent")
    group.add_argument("--model", metavar="SPEC",
                       help="openai:MODEL, anthropic:MODEL, ollama:MODEL, provider:MODEL@URL, "
                            "local (the embedded model), local:FILE.gguf, or scripted:FILE.json "
                            "(replay replies from a file). Default: openai:gpt-4o-mini with "
                            "OPENAI_API_KEY set, else anthropic:claude-sonnet-4-5 with "
                            "ANTHROPIC_API_KEY set, else local")
    group.add_argument("--base-url", metavar="URL",
                       help="an OpenAI-compatible server (with --model NAME), or another base "
                            "URL for --model PROVIDER:MODEL")
    group.add_argument("--system", metavar="TEXT", help="the system prompt")
    group.add_argument("--parallel", action="store_true",
                       help="run the tool calls of one reply in parallel")
    group.add_argument("--max-turns", metavar="N", type=_positive_int, default=50,
                       help="LLM calls per run before it stops (default: 50)")
    group.add_argument("--temperature", metavar="T", type=_temperature,
                       help="sampling temperature sent to the model (0: always the likeliest "
                            "token; the server's default when not given)")
    group.add_argument("--no-stream", action="store_true",
                       help="ask the model for whole replies, not streamed ones (for servers that "
                            "cannot stream; one that sends an empty stream is asked again this "
                            "way by itself)")
    group.add_argument("--allow-write-tool", action="store_true",
                       help="offer the example writeTool, with which the model writes and runs "
                            "new tools (Python code); every call of it is asked about first")
    group.add_argument("--yes", action="store_true",
                       help="allow every call of a tool that is asked about (writeTool) without "
                            "asking")

    parser = argparse.ArgumentParser(
        prog="yiemagent", description="Talk to an LLM agent that calls tools.",
        epilog="Start with: yiemagent chat. Each command has --help.")
    parser.add_argument("--version", action="version", version=f"yiemagent {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    chat = commands.add_parser(
        "chat", parents=[tools_opt, agent_opts], help="talk with the agent in the terminal",
        description="Talk with the agent. Commands: /tools, /reset, /save FILE, /load FILE, "
                    "/help, /exit. Ctrl-C stops the current answer; Ctrl-D or /exit quits.")
    chat.set_defaults(handler=cmd_chat)

    run = commands.add_parser(
        "run", parents=[tools_opt, agent_opts], help="answer one prompt and exit",
        description="Answer one prompt: the answer on stdout, tool activity on stderr. Exit "
                    "status 1 when the run ended in an error, was aborted or ran out of turns.")
    run.add_argument("prompt", metavar="PROMPT", help="the prompt ('-': read it from stdin)")
    run.add_argument("--json", action="store_true",
                     help="print the final message as JSON (its to_dict() form)")
    run.add_argument("--events", choices=["jsonl"],
                     help="write every event as one JSON object per line, to stdout (instead "
                          "of the answer) or to --events-file")
    run.add_argument("--events-file", metavar="FILE",
                     help="write the events there (implies --events jsonl; '-': stdout); "
                          "stdout keeps the answer")
    run.add_argument("-q", "--quiet", action="store_true",
                     help="do not show the tool activity on stderr")
    run.set_defaults(handler=cmd_run)

    tools = commands.add_parser(
        "tools", parents=[tools_opt], help="list the tools of a folder, or check its files",
        description="List the tools of FOLDER (default: --tools, else the example tools) with "
                    "their input schemas, or check that every file loads.")
    tools.add_argument("folder", metavar="FOLDER", nargs="?", help="the folder of tool files")
    tools.add_argument("--check", action="store_true",
                       help="load every file and report each problem with its file and line; "
                            "exit status 1 when there is one")
    tools.add_argument("--json", action="store_true", help="list the tools as JSON")
    tools.set_defaults(handler=cmd_tools)
    return parser


def _tolerant(stream: Any) -> None:
    """Let ``stream`` replace what its encoding cannot write rather than fail mid-answer."""
    reconfigure = getattr(stream, "reconfigure", None)
    if callable(reconfigure):
        with contextlib.suppress(ValueError, OSError):
            reconfigure(errors="replace")


def _exit_on(signum: int, _frame: object) -> None:
    """Signal handler: end the command through ``SystemExit`` (status 128 + signal), so that
    ``with`` blocks still run: the agent is aborted and the temporary tool folder removed."""
    raise SystemExit(128 + signum)


def _stop_cleanly_on_signals() -> dict[int, Any]:
    """Make SIGTERM and SIGHUP (a closed terminal) end the command like Ctrl-C does, instead of
    killing it before it cleans up; return the handlers replaced, to put back afterwards."""
    previous: dict[int, Any] = {}
    for name in ("SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)
        if number is not None:
            with contextlib.suppress(ValueError, OSError):  # not the main thread, or refused
                previous[number] = signal.signal(number, _exit_on)
    return previous


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``yiemagent`` command with ``argv`` (default: the process arguments) and return
    its exit status. Problems the user can fix are one ``yiemagent: error: ...`` message on
    stderr (exit 2), never a traceback."""
    closed = reopen_closed_descriptors()
    if "stdout" in closed:
        sys.stderr.write("yiemagent: error: stdout is closed, so the output would be lost; "
                         "redirect it instead (>/dev/null to drop it)\n")
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return 2
    _tolerant(sys.stdout)
    _tolerant(sys.stderr)
    logging.basicConfig(format="yiemagent: %(levelname)s: %(message)s", level=logging.WARNING)
    if args.verbose:  # the library's own loggers only: not every HTTP library's chatter
        logging.getLogger("yiemagent").setLevel(logging.DEBUG)
    previous_handlers = _stop_cleanly_on_signals()
    try:
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except CliError as exc:
        sys.stderr.write(f"yiemagent: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (`yiemagent run ... | head -1`): nothing more can be
        # written there, and Python's final flush must not complain about it either.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    finally:
        for number, old in previous_handlers.items():
            signal.signal(number, old)
