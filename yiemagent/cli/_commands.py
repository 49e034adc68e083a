"""The ``yiemagent`` command's three commands: ``run``, ``tools`` and ``chat``. Imported only
once the command line is parsed, so that ``yiemagent --help`` loads none of the library.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Collection
from typing import Any, TextIO

from yiemagent.cli._approve import Approver, settle_approvals
from yiemagent.cli._chat import run_chat
from yiemagent.cli._io import read_prompt, stdout_to_stderr
from yiemagent.cli._model import CliError, ModelChoice, check_record_path, choose_model, recorded
from yiemagent.cli._render import Renderer
from yiemagent.cli._schema import read_schema
from yiemagent.cli._session import (
    EXAMPLE_TOOL,
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
from yiemagent.core._output_json import output_json
from yiemagent.integrations._event_log import JsonlEventWriter
from yiemagent.tools._store import ToolStore

__all__ = ["cmd_chat", "cmd_run", "cmd_tools"]


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
        raise CliError(
            "--json and --events jsonl both write to stdout; send the events to a "
            "file with --events-file FILE"
        )
    return to_stdout


def _open_events_file(args: argparse.Namespace, stack: contextlib.ExitStack) -> TextIO:
    """The ``--events-file``, open for writing and closed with ``stack`` (a write error is
    reported from ``writer.broken``, not again when it closes). Opened before stdout moves,
    so that ``/dev/stdout`` still names the real one, but in append mode: ``_start_afresh``
    empties it once the command is sure to run, so one that cannot start keeps what a
    previous run wrote there."""
    try:
        stream = open(args.events_file, "a", encoding="utf-8")  # noqa: SIM115 (closed by stack)
    except (OSError, ValueError) as exc:  # ValueError: a NUL character in the name
        raise CliError(
            f"--events-file {args.events_file}: cannot write it: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    stack.callback(_close_quietly, stream)
    return stream


def _start_afresh(stream: TextIO) -> None:
    """Empty the events file (a regular file; a pipe or device has nothing to empty)."""
    with contextlib.suppress(OSError):
        if stream.seekable():
            stream.truncate(0)


def _close_quietly(stream: TextIO) -> None:
    """Close ``stream``, ignoring a write error: the events writer has reported it already."""
    with contextlib.suppress(OSError):
        stream.close()


def _answer(
    args: argparse.Namespace, choice: ModelChoice, prompt: str, events: TextIO | None
) -> tuple[AssistantMessage, JsonlEventWriter | None]:
    """Run the agent once on ``prompt`` with the model ``choice`` and return its response (once
    no call waits for approval: the approver asks), with the writer of the events to
    ``events`` when there is one (its ``broken`` says whether every event was written)."""
    with contextlib.ExitStack() as stack:
        tools = stack.enter_context(open_tools(args.tools, args.mcp, args.allow_write_tool))
        warn_problems(tools.problems, sys.stderr)
        sinks: list[Sink] = []
        writer: JsonlEventWriter | None = None
        say = _write_to_stderr
        line_ended: Callable[[], None] | None = None
        if not args.quiet:
            renderer = Renderer(sys.stderr, show_text=False, status=sys.stderr)
            sinks.append(renderer)
            say, line_ended = renderer.write, renderer.line_typed
        if events is not None:
            writer = JsonlEventWriter(events)
            sinks.append(writer)
        agent = build_agent(args, choice, tools.store, sinks)
        stack.push(shutdown_on_exit(agent))
        approver = Approver(say, yes=args.yes, quiet=args.quiet, line_ended=line_ended, record=writer)
        agent.run_agent(prompt)

        def wait() -> AssistantMessage:
            # Through the renderer: it erases the status line before the note is written.
            return wait_for_response(agent, lambda: say(ABORTING))

        return settle_approvals(agent, wait(), approver, wait), writer


def _write_to_stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def _deliver(
    args: argparse.Namespace,
    response: AssistantMessage,
    out: TextIO,
    writer: JsonlEventWriter | None,
    to_stdout: bool,
) -> None:
    """Write the answer (or ``--json``) to ``out`` and make sure it and the events got there:
    a reader of stdout that went away is ``BrokenPipeError`` (exit 1, silently, as for
    ``| head -1``); another write error is ``CliError`` (exit 1) saying where and why."""
    try:
        if args.json:
            data = response.to_dict()
            if response.run_usage is not None:
                data["run_usage"] = response.run_usage.to_dict()
            print(json.dumps(data, indent=2, allow_nan=False), file=out)
        elif response.output is not None and not to_stdout:  # --schema: the data, as JSON
            print(json.dumps(output_json(response.output), indent=2, ensure_ascii=False), file=out)
        elif not to_stdout:
            text = answer_text(response)
            if text and out.isatty():  # a person reads it: no escape sequence from the model
                text = printable(text)
            if text:
                print(text, file=out)
        out.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise CliError(
            f"the answer could not be written to stdout: {exc.strerror or exc}", exit_code=1
        ) from None
    broken = writer.broken if writer is not None else None
    if broken is None:
        return
    if to_stdout and isinstance(broken, BrokenPipeError):
        raise broken
    where = "stdout" if to_stdout else f"--events-file {args.events_file}"
    raise CliError(
        f"the events could not all be written to {where}: {broken.strerror or broken}", exit_code=1
    )


def _model(args: argparse.Namespace) -> ModelChoice:
    """The model ``--model`` and its options choose, recorded to ``--record``'s cassette when given."""
    check_record_path(args.record, args.model)
    choice = choose_model(
        args.model,
        args.base_url,
        stream=not args.no_stream,
        temperature=args.temperature,
        replay_match=args.replay_match,
    )
    return recorded(choice, args.record) if args.record is not None else choice


def cmd_run(args: argparse.Namespace) -> int:
    """``yiemagent run PROMPT``: one run; see the module docstring for outputs and exit codes.
    Only the command's results reach stdout: whatever tools print goes to stderr."""
    prompt = read_prompt(args.prompt)
    if not prompt.strip():
        raise CliError("the prompt is empty; give it as an argument, or '-' to read it from stdin")
    if args.output_mode is not None and args.schema is None:
        raise CliError("--output-mode says how the model gives a --schema output; give --schema too")
    args.schema_data = read_schema(args.schema) if args.schema is not None else None
    to_stdout = _settle_events(args)
    with contextlib.ExitStack() as stack:
        to_file = args.events is not None and not to_stdout
        events = _open_events_file(args, stack) if to_file else None
        out = stack.enter_context(stdout_to_stderr())  # (a model's start-up may print)
        choice = _model(args)
        stack.callback(choice.close)
        if events is not None:
            _start_afresh(events)
        response, writer = _answer(args, choice, prompt, out if to_stdout else events)
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
    return (
        "the model's reply was empty (no text, stop reason "
        f"{response.stop_reason!r}); ask again, or try another model (--model)"
    )


WRITE_TOOL_FLAG = "--allow-write-tool"
# How `tools` marks the example writeTool, which `run` and `chat` leave out unless asked.
WRITE_TOOL_NOTE = f"run and chat offer it only with {WRITE_TOOL_FLAG}, and ask before each call"


def _describe_tools(
    store: ToolStore, as_json: bool, origin: Callable[[str], str], flagged: Collection[str] = ()
) -> str:
    """The store's tools for ``yiemagent tools``: each with its label, file, description and
    input schema as indented text, or (``as_json``) as a JSON list of objects; the tools in
    ``flagged`` (the example ``writeTool``) say that ``run`` and ``chat`` offer them only with
    ``--allow-write-tool`` (``"offered_only_with"`` in the JSON). Neither holds a control
    character: the JSON escapes them, the text leaves them out (``printable``; tabs become
    spaces), so a tool's name or description cannot send escape sequences to the terminal."""
    tools = list(store.tools.values())
    if as_json:  # ensure_ascii: every control character is written as a \u escape
        listed = []
        for t in tools:
            entry = {
                "name": t.name,
                "label": t.label,
                "description": t.description,
                "input_schema": t.input_schema,
                "parallel": t.parallel_tool_execute,
                "file": store.source_of(t.name),
                "from": origin(t.name),
            }
            if t.name in flagged:
                entry["offered_only_with"] = WRITE_TOOL_FLAG
            listed.append(entry)
        return json.dumps(listed, indent=2)
    parts = []
    for tool in tools:
        schema = json.dumps(tool.input_schema, indent=2, ensure_ascii=False)
        lines = [*tool.description.splitlines(), "input schema:", *schema.splitlines()]
        body = "\n".join("    " + line for line in lines)
        where = origin(tool.name) + (f"; {WRITE_TOOL_NOTE}" if tool.name in flagged else "")
        parts.append(f"{tool.name}: {tool.label}  ({where})\n{body}")
    return printable("\n\n".join(parts)).expandtabs(4)


def cmd_tools(args: argparse.Namespace) -> int:
    """``yiemagent tools [FOLDER]``: list the tools with their schemas, or ``--check`` every
    file and name each problem with its file and line (exit 1 when there is one)."""
    folder = next((f for f in (args.folder, args.tools) if f is not None), None)
    examples = folder is None
    if folder is None:
        folder = example_tools_folder()
    else:
        check_tools_folder(folder)
    with ToolStore("cli-tools") as store:
        with stdout_to_stderr():  # what tool files print as they load must not mix with the list
            problems = load_folder(store, folder)
            servers = load_mcp(store, args.mcp)
        # run and chat leave the example writeTool out unless --allow-write-tool; a folder
        # named with --tools is offered as it is, so its writeTool needs no note.
        flagged = {n for n in store.tools if examples and (store.source_of(n) or "").endswith(EXAMPLE_TOOL)}
        return _report_tools(args, Tools(store, shown_path(folder), problems, servers), folder, flagged)


def _report_tools(args: argparse.Namespace, tools: Tools, folder: Any, flagged: Collection[str] = ()) -> int:
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
    print(_describe_tools(store, args.json, tools.origin, flagged))
    warn_problems(problems, sys.stderr)
    return 1 if problems else 0


def cmd_chat(args: argparse.Namespace) -> int:
    """``yiemagent chat``: the interactive session (see ``cli_chat``); ``CliError`` when stdin
    is closed, as there is nothing to read the messages from."""
    if sys.stdin is None:
        raise CliError(
            "stdin is closed: yiemagent chat reads your messages from it; run it in "
            "a terminal, or give it input (yiemagent chat < messages.txt), or use "
            "yiemagent run PROMPT"
        )
    choice = _model(args)
    with contextlib.ExitStack() as stack:
        stack.callback(choice.close)
        tools = stack.enter_context(open_tools(args.tools, args.mcp, args.allow_write_tool))
        warn_problems(tools.problems, sys.stderr)
        renderer = Renderer(sys.stdout, status=sys.stderr)
        agent = build_agent(args, choice, tools.store, [renderer])
        stack.push(shutdown_on_exit(agent))
        approver = Approver(renderer.write, yes=args.yes, line_ended=renderer.line_typed)
        return run_chat(agent, renderer, choice, tools, args.max_turns, approver)
