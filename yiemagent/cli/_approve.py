"""Asking the person at the terminal before a tool call runs (``--approve``, ``needs_approval``).

The agent pauses a batch whose calls need approval (its response has ``stop_reason
"awaiting_approval"``); ``settle_approvals`` then asks about each waiting call in order: the
tool, the exact arguments that will run as JSON, and ``[y]es / [n]o / [e]dit``. ``n`` asks for
an optional reason; ``e`` opens the arguments in ``$VISUAL``/``$EDITOR`` on a terminal (without
one set, or without a terminal, it reads a JSON object typed or piped in). An edit that is not
valid JSON, not an object or not valid for the tool is shown and the question is asked again.
The end of the input (or Ctrl-C) while asking denies the remaining calls, saying so. With
``--yes`` every call is approved without asking, one line each. The decisions go to
``agent.resume(approvals=...)``, the next response is waited for, and the loop goes on until a
response that waits for nothing. Each decision is also an ``approval_decision`` event for the
``--events jsonl`` stream.

Calls of ``writeTool`` (it writes and runs code) always wait for approval: ``approval_policy``
says so, with or without ``--approve``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Collection, Mapping
from typing import Any, ClassVar, TextIO

import attrs

from yiemagent.agent._agent import YiemAgent
from yiemagent.cli._render import one_line
from yiemagent.cli._text import printable
from yiemagent.core._approval import Approve, Decision, Deny, Edit, PendingApproval
from yiemagent.core._arguments import validate_tool_arguments
from yiemagent.core._content import AgentToolCall
from yiemagent.core._events import AgentEvent
from yiemagent.core._json_safety import MAX_JSON_DEPTH, argument_problem, json_ready
from yiemagent.core._messages import AssistantMessage
from yiemagent.core._tools import AgentTool
from yiemagent.errors import ApprovalError, CliError, describe_error

__all__ = [
    "ASK_TOOLS",
    "AWAITING_APPROVAL",
    "ApprovalDecisionEvent",
    "Approver",
    "approval_policy",
    "settle_approvals",
]

ASK_TOOLS = frozenset({"writeTool"})  # tools that write and run code: asked about every time
AWAITING_APPROVAL = "awaiting_approval"
QUESTION = "Run it? [y]es / [n]o / [e]dit "
REASON_PROMPT = "Reason (optional, Enter for none): "
JSON_PROMPT = "json> "
_MAX_SHOWN_LINES = 60
_PASTE_MARKS = ("\x1b[200~", "\x1b[201~")  # bracketed paste, as the chat turns it on
_POLL_S = 0.1  # how often a read from the terminal lets Ctrl-C (a Python signal handler) act


def approval_policy(
    approve_all: bool, ask: Collection[str] = ASK_TOOLS, never: Collection[str] = ()
) -> Callable[..., bool]:
    """The agent's ``needs_approval``: every call with ``approve_all`` (``--approve``), else
    the calls of the tools in ``ask`` (writeTool); never those of the tools in ``never``.
    Tools that declare ``needs_approval`` ask by themselves."""
    names, free = frozenset(ask), frozenset(never)

    def needs_approval(tool: AgentTool, _args: dict[str, Any], _context: Any) -> bool:
        return tool.name not in free and (approve_all or tool.name in names)

    return needs_approval


@attrs.define(frozen=True)
class ApprovalDecisionEvent(AgentEvent):
    """What was decided for one waiting call (written to the ``--events jsonl`` stream; the
    agent never emits it)."""

    tool_call_id: str
    tool_name: str
    decision: str  # "approve", "deny" or "edit"
    arguments: Any = None  # approve: the arguments that run; edit: the edited ones
    reason: str | None = None  # deny: the text the model is given
    event_type: ClassVar[str] = "approval_decision"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "type": self.event_type,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "decision": self.decision,
        }
        if self.decision != "deny":
            data["arguments"] = json_ready(self.arguments)
        else:
            data["reason"] = self.reason
        return data


def _shown_arguments(args: Any) -> str:
    """The arguments as indented JSON, without control characters, cut to a screenful."""
    text = printable(json.dumps(json_ready(args), indent=2, ensure_ascii=False))
    lines = text.splitlines()
    if len(lines) > _MAX_SHOWN_LINES:
        lines = [*lines[:_MAX_SHOWN_LINES], f"... ({len(lines) - _MAX_SHOWN_LINES} more lines)"]
    return "\n".join("    " + line for line in lines)


class _NoAnswer(Exception):
    """The input ended (or Ctrl-C came) while a question waited; ``why`` says which."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class _Retry(Exception):
    """An edit that cannot be used; the message says why, and the question is asked again."""


class Approver:
    """Asks about the calls that wait for approval. ``say(text)`` shows text (through the
    command's renderer; ``line_ended()`` tells it that the Enter typed on the terminal ended
    the line). Answers are read from stdin (``read_line(prompt)`` when given; it raises
    ``EOFError`` at the end of the input). ``yes`` approves every call without asking
    (``--yes``; ``quiet`` then leaves out the line each approval shows). ``record`` gets each
    decision as an ``ApprovalDecisionEvent`` (the ``--events jsonl`` writer)."""

    def __init__(
        self,
        say: Callable[[str], None],
        *,
        yes: bool = False,
        quiet: bool = False,
        line_ended: Callable[[], None] | None = None,
        read_line: Callable[[str], str] | None = None,
        stdin: TextIO | None = None,
        record: Callable[[AgentEvent], None] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.say = say
        self.yes = yes
        self.quiet = quiet
        self.line_ended = line_ended
        self.read_line = read_line
        self.stdin = stdin
        self.record = record
        self.environ = environ if environ is not None else os.environ

    # -- the whole batch -------------------------------------------------------------------

    def decide(self, agent: YiemAgent, pending: list[PendingApproval]) -> dict[str, Decision]:
        """A decision for each call of ``pending``, asked in order (or all approved with
        ``yes``); each is recorded."""
        decisions: dict[str, Decision] = {}
        if self.yes:
            for call in pending:
                decisions[call.tool_call_id] = Approve()
                if not self.quiet:
                    args = json.dumps(json_ready(dict(call.arguments)), ensure_ascii=False)
                    self.say(f"  approved (--yes): {printable(call.tool_name)} {one_line(args, 200)}\n")
        else:
            for index, call in enumerate(pending):
                try:
                    decisions[call.tool_call_id] = self._ask(agent, call)
                except _NoAnswer as stop:
                    left = pending[index:]
                    for rest in left:
                        decisions[rest.tool_call_id] = Deny(
                            f'Tool "{rest.tool_name}" was not run: no answer ({stop.why}).'
                        )
                    count = f"{len(left)} call{'' if len(left) == 1 else 's'}"
                    self.say(f"\nno answer ({stop.why}): denied {count} waiting for approval\n")
                    break
        for call in pending:
            self._record(call, decisions[call.tool_call_id])
        return decisions

    def _record(self, call: PendingApproval, decision: Decision) -> None:
        if self.record is None:
            return
        if isinstance(decision, Deny):
            event = ApprovalDecisionEvent(call.tool_call_id, call.tool_name, "deny", reason=decision.reason)
        elif isinstance(decision, Edit):
            event = ApprovalDecisionEvent(call.tool_call_id, call.tool_name, "edit", dict(decision.arguments))
        else:
            event = ApprovalDecisionEvent(call.tool_call_id, call.tool_name, "approve", dict(call.arguments))
        self.record(event)

    # -- one call --------------------------------------------------------------------------

    def _ask(self, agent: YiemAgent, call: PendingApproval) -> Decision:
        """Ask about ``call`` until the answer is a usable decision."""
        name = printable(call.tool_name)
        draft = json.dumps(json_ready(dict(call.arguments)), indent=2, ensure_ascii=False) + "\n"
        while True:
            self.say(f"\nThe model wants to call {name} with:\n{_shown_arguments(dict(call.arguments))}\n")
            answer = self._line(QUESTION).strip()
            if answer.lower() in ("y", "yes"):
                return Approve()
            word, _, reason = answer.partition(" ")
            if word.lower() in ("n", "no"):
                reason = reason.strip()
                if not reason and self._is_terminal():  # piped answers give it on the line
                    reason = self._line(REASON_PROMPT).strip()
                return Deny(f"The user denied this tool call: {reason}") if reason else Deny()
            if answer.lower() in ("e", "edit"):
                try:
                    text = self._edited(draft)
                    draft = text
                    return Edit(self._checked(agent, call, text))
                except _Retry as problem:
                    self.say(f"the edit cannot be used: {printable(str(problem))}\nasking again\n")
                continue
            self.say("answer y (run it), n (do not run it) or e (edit its arguments first)\n")

    def _line(self, prompt: str) -> str:
        """One line of input (without paste marks); ``_NoAnswer`` at its end or on Ctrl-C."""
        terminal = self._is_terminal()
        try:
            if self.read_line is not None:
                line = self.read_line(prompt)
            elif terminal:
                line = self._terminal_line(prompt)
            else:  # a pipe or a file: the prompt through the renderer, the line from stdin
                self.say(prompt)
                line = input()
        except EOFError:
            raise _NoAnswer("the input ended") from None
        except KeyboardInterrupt:
            raise _NoAnswer("interrupted") from None
        except (OSError, RuntimeError, ValueError):
            # stdin closed (input() says "lost sys.stdin"), or a read of a closed file: nobody
            # can answer, so the call is denied as at the end of the input.
            raise _NoAnswer("the input is closed") from None
        for mark in _PASTE_MARKS:
            line = line.replace(mark, "")
        if not terminal:  # nothing echoed it: show it, for a readable transcript
            self.say(printable(line) + "\n")
        return line

    def _terminal_line(self, prompt: str) -> str:
        """One line typed on the terminal (stdin), after showing ``prompt``. Waits in short
        steps rather than in one blocking read: a Ctrl-C that comes just before the read, or
        that the kernel hands to another thread, must still stop the question at once."""
        self.say(prompt)
        stdin = self.stdin if self.stdin is not None else sys.stdin
        fd = stdin.fileno()
        while True:
            ready, _, _ = select.select([fd], [], [], _POLL_S)
            if ready:
                break
        data = os.read(fd, 65536)  # a terminal in line mode gives one line per read
        if not data:
            raise EOFError
        if self.line_ended is not None and data.endswith(b"\n"):
            self.line_ended()
        return data.decode(getattr(stdin, "encoding", None) or "utf-8", "replace").rstrip("\r\n")

    def _is_terminal(self) -> bool:
        stdin = self.stdin if self.stdin is not None else sys.stdin
        try:
            return stdin is not None and not stdin.closed and stdin.isatty()
        except (AttributeError, ValueError, OSError):
            return False

    def _editor(self) -> str | None:
        for name in ("VISUAL", "EDITOR"):
            value = self.environ.get(name, "").strip()
            if value:
                return value
        return None

    def _edited(self, draft: str) -> str:
        """The edited arguments' text: from the editor on a terminal with one set, else typed
        (or piped) as JSON lines. ``_Retry`` when the editor failed."""
        editor = self._editor()
        if editor is not None and self._is_terminal():
            return self._run_editor(editor, draft)
        self.say("Type the arguments as one JSON object (an empty line ends it):\n")
        text = ""
        while True:
            line = self._line(JSON_PROMPT)
            if not line.strip():
                return text
            text += line + "\n"
            with contextlib.suppress(ValueError, RecursionError):
                json.loads(text)
                return text

    def _run_editor(self, editor: str, draft: str) -> str:
        """Open ``draft`` in ``editor`` (a command line; the file name is added) and return
        what the file holds when it exits."""
        try:
            command = shlex.split(editor)
        except ValueError as exc:
            raise _Retry(f"the editor command {editor!r} cannot be read: {exc}") from None
        fd, path = tempfile.mkstemp(prefix="yiemagent-arguments-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as stream:
                stream.write(draft)
            self.say(f"editing the arguments with {printable(editor)} ...\n")
            try:
                done = subprocess.run([*command, path], check=False)
            except OSError as exc:
                raise _Retry(f"the editor {editor!r} could not start: {describe_error(exc)}") from None
            if done.returncode != 0:
                raise _Retry(f"the editor exited with status {done.returncode}; nothing was changed")
            with open(path, encoding="utf-8", errors="replace") as stream:
                return stream.read()
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def _checked(self, agent: YiemAgent, call: PendingApproval, text: str) -> dict[str, Any]:
        """The edited arguments, parsed and checked against the tool; ``_Retry`` saying why
        they cannot be used (the agent checks them again when it resumes)."""
        if not text.strip():
            raise _Retry("no arguments were given")
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise _Retry(f"it is not valid JSON ({exc})") from None
        except RecursionError:
            raise _Retry(f"it is nested too deep (at most {MAX_JSON_DEPTH} levels)") from None
        if not isinstance(value, dict):
            raise _Retry(f"the arguments must be a JSON object, not {type(value).__name__}")
        unusable = argument_problem(value)
        if unusable is not None:
            raise _Retry(f"the arguments cannot be used: {unusable}")
        tool = agent.tools.get(call.tool_name)
        if tool is not None:
            try:
                validate_tool_arguments(tool, AgentToolCall(call.tool_call_id, call.tool_name, value))
            except Exception as exc:  # ToolArgumentError, or the tool's own validator raised
                raise _Retry(str(exc) or describe_error(exc)) from None
        return value


def settle_approvals(
    agent: YiemAgent,
    response: AssistantMessage,
    approver: Approver,
    wait: Callable[[], AssistantMessage],
) -> AssistantMessage:
    """While ``response`` waits for approval: get the decisions from ``approver``, resume the
    agent with them and ``wait`` for the next response (a resumed run may pause again).
    Return the first response that waits for nothing."""
    while response.stop_reason == AWAITING_APPROVAL:
        pending = agent.pending_approvals
        if not pending:
            return response
        decisions = approver.decide(agent, pending)
        try:
            agent.resume(approvals=decisions)
        except ApprovalError as exc:
            if not any(isinstance(d, Edit) for d in decisions.values()):
                raise CliError(f"the decisions were refused: {exc}", exit_code=1) from None
            approver.say(f"{printable(str(exc))}\nasking again\n")
            continue
        response = wait()
    return response
