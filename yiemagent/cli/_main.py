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
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from yiemagent.cli._io import reopen_closed_descriptors
from yiemagent.errors import CliError

__all__ = ["build_parser", "main"]


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


def _window(text: str) -> int | str:
    """argparse type of ``--context-window``: a whole number of at least 1, or ``auto``."""
    return "auto" if text == "auto" else _positive_int(text)


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
    tools_opt.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log what the library does on stderr, tracebacks of failing tools included",
    )
    tools_opt.add_argument(
        "--tools", metavar="FOLDER", help="folder of tool files (default: the example tools)"
    )
    tools_opt.add_argument(
        "--mcp",
        metavar="SERVER",
        action="append",
        default=[],
        help="also use the tools of an MCP server: a command line run over "
        "stdio ('uvx mcp-server-time') or an http(s) URL; repeatable",
    )
    agent_opts = argparse.ArgumentParser(add_help=False)
    group = agent_opts.add_argument_group("model and agent")
    group.add_argument(
        "--model",
        metavar="SPEC",
        help="openai:MODEL, anthropic:MODEL, ollama:MODEL, provider:MODEL@URL, "
        "local (the embedded model), local:FILE.gguf, scripted:FILE.json "
        "(replay replies from a file), or replay:CASSETTE.json (answer from a run "
        "recorded with --record, offline). Default: openai:gpt-4o-mini with "
        "OPENAI_API_KEY set, else anthropic:claude-sonnet-4-5 with "
        "ANTHROPIC_API_KEY set, else local",
    )
    group.add_argument(
        "--base-url",
        metavar="URL",
        help="an OpenAI-compatible server (with --model NAME), or another base "
        "URL for --model PROVIDER:MODEL",
    )
    group.add_argument(
        "--record",
        metavar="CASSETTE",
        help="write every call to the model (request, reply, streamed pieces; never a key) "
        "to this cassette file, for --model replay:CASSETTE later",
    )
    group.add_argument(
        "--replay-match",
        choices=["strict", "sequence"],
        default="strict",
        help="with --model replay:CASSETTE: strict (each request must be the recorded one; "
        "the default) or sequence (the recorded replies in order, whatever is asked)",
    )
    group.add_argument("--system", metavar="TEXT", help="the system prompt")
    group.add_argument("--parallel", action="store_true", help="run the tool calls of one reply in parallel")
    group.add_argument(
        "--max-turns",
        metavar="N",
        type=_positive_int,
        default=50,
        help="LLM calls per run before it stops (default: 50)",
    )
    group.add_argument(
        "--max-llm-calls",
        metavar="N",
        type=_positive_int,
        help="stop a run (stop reason usage_limit) before its N+1th LLM call",
    )
    group.add_argument(
        "--max-total-tokens",
        metavar="N",
        type=_positive_int,
        help="stop a run before an LLM call that would take it past N tokens, input and "
        "output together, as the model reports them",
    )
    group.add_argument(
        "--context-window",
        metavar="TOKENS|auto",
        type=_window,
        help="the model's context window (the embedded model's is known; auto reads it from "
        "the server's model listing, where it gives one): a request that would not fit is not "
        "sent (see --context-strategy)",
    )
    group.add_argument(
        "--context-strategy",
        choices=["error", "trim"],
        default="error",
        help="for a request that would not fit the context window: error (end the run; the "
        "default) or trim (leave out the oldest turns)",
    )
    group.add_argument(
        "--temperature",
        metavar="T",
        type=_temperature,
        help="sampling temperature sent to the model (0: always the likeliest "
        "token; the server's default when not given)",
    )
    group.add_argument(
        "--no-stream",
        action="store_true",
        help="ask the model for whole replies, not streamed ones (for servers that "
        "cannot stream; one that sends an empty stream is asked again this "
        "way by itself)",
    )
    group.add_argument(
        "--allow-write-tool",
        action="store_true",
        help="offer the example writeTool, with which the model writes and runs "
        "new tools (Python code); every call of it is asked about first",
    )
    group.add_argument(
        "--approve",
        action="store_true",
        help="ask before every tool call: the tool, its arguments as JSON, and "
        "[y]es / [n]o / [e]dit (tools that declare needs_approval, and writeTool, "
        "always ask)",
    )
    group.add_argument(
        "--yes",
        action="store_true",
        help="approve every call that would be asked about without asking (also with "
        "--approve), showing one line per call",
    )

    parser = argparse.ArgumentParser(
        prog="yiemagent",
        description="Talk to an LLM agent that calls tools.",
        epilog="Start with: yiemagent chat. Each command has --help.",
    )
    parser.add_argument("--version", action="version", version=f"yiemagent {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    chat = commands.add_parser(
        "chat",
        parents=[tools_opt, agent_opts],
        help="talk with the agent in the terminal",
        description="Talk with the agent. Commands: /tools, /reset, /save FILE, /load FILE, "
        "/help, /exit. Ctrl-C stops the current answer; Ctrl-D or /exit quits.",
    )
    chat.set_defaults(command="chat")

    run = commands.add_parser(
        "run",
        parents=[tools_opt, agent_opts],
        help="answer one prompt and exit",
        description="Answer one prompt: the answer on stdout, tool activity on stderr. Exit "
        "status 1 when the run ended in an error, was aborted or ran out of turns.",
    )
    run.add_argument("prompt", metavar="PROMPT", help="the prompt ('-': read it from stdin)")
    run.add_argument(
        "--json", action="store_true", help="print the final message as JSON (its to_dict() form)"
    )
    run.add_argument(
        "--events",
        choices=["jsonl"],
        help="write every event as one JSON object per line, to stdout (instead "
        "of the answer) or to --events-file",
    )
    run.add_argument(
        "--events-file",
        metavar="FILE",
        help="write the events there (implies --events jsonl; '-': stdout); stdout keeps the answer",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="do not show the tool activity on stderr")
    run.add_argument(
        "--schema",
        metavar="FILE|JSON",
        help="answer with data matching this JSON Schema (a file, or the schema as JSON text); "
        "the output is printed as JSON",
    )
    run.add_argument(
        "--output-mode",
        choices=["tool", "native", "grammar"],
        help="how the model gives the --schema output: a final-answer tool, the provider's "
        "JSON response format, or constrained decoding (default: grammar on the embedded "
        "model, tool on every other)",
    )
    run.set_defaults(command="run")

    tools = commands.add_parser(
        "tools",
        parents=[tools_opt],
        help="list the tools of a folder, or check its files",
        description="List the tools of FOLDER (default: --tools, else the example tools) with "
        "their input schemas, or check that every file loads.",
    )
    tools.add_argument("folder", metavar="FOLDER", nargs="?", help="the folder of tool files")
    tools.add_argument(
        "--check",
        action="store_true",
        help="load every file and report each problem with its file and line; "
        "exit status 1 when there is one",
    )
    tools.add_argument("--json", action="store_true", help="list the tools as JSON")
    tools.set_defaults(command="tools")
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
        sys.stderr.write(
            "yiemagent: error: stdout is closed, so the output would be lost; "
            "redirect it instead (>/dev/null to drop it)\n"
        )
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "command", None) is None:
        parser.print_help(sys.stderr)
        return 2
    _tolerant(sys.stdout)
    _tolerant(sys.stderr)
    logging.basicConfig(format="yiemagent: %(levelname)s: %(message)s", level=logging.WARNING)
    if args.verbose:  # the library's own loggers only: not every HTTP library's chatter
        logging.getLogger("yiemagent").setLevel(logging.DEBUG)
    previous_handlers = _stop_cleanly_on_signals()
    try:
        commands = importlib.import_module("yiemagent.cli._commands")
        handler: Callable[[argparse.Namespace], int] = getattr(commands, f"cmd_{args.command}")
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
