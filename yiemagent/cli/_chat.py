"""``yiemagent chat``: the interactive session, its slash commands and its Ctrl-C handling.

Each line the user types is a message to the agent, shown back as it streams, with the tool
calls live; the lines between ``!multi`` and ``!end``, or a paste of several lines (in a
terminal that marks pastes), are one message. ``/tools``, ``/reset``, ``/save FILE``,
``/load FILE``, ``/help`` and ``/exit`` act on the session instead. Ctrl-C during an answer
aborts that run only (``agent.abort()``); at the prompt it clears the line; Ctrl-D or ``/exit``
ends the session.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Callable, Iterator

from yiemagent.agent._agent import YiemAgent
from yiemagent.agent._session import load_session
from yiemagent.cli._approve import Approver, settle_approvals
from yiemagent.cli._model import ModelChoice
from yiemagent.cli._render import Renderer, one_line
from yiemagent.cli._session import Tools, answer_text, failure, wait_for_response
from yiemagent.core._messages import AssistantMessage
from yiemagent.errors import CliError, SessionError, describe_error

__all__ = ["COMMANDS", "PROMPT", "ChatSession", "read_message", "run_chat"]

PROMPT = "you> "
MULTI_PROMPT = "...  "
MULTI_START, MULTI_END = "!multi", "!end"  # as Simon Willison's `llm chat` spells them
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"  # how a terminal marks pasted text
PASTE_ON, PASTE_OFF = "\x1b[?2004h", "\x1b[?2004l"
COMMANDS = {
    "/tools": "list the agent's tools",
    "/reset": "start a new conversation (the history is cleared)",
    "/save FILE": "save the conversation to FILE (JSON)",
    "/load FILE": "continue a conversation saved with /save",
    "/help": "show this list",
    "!multi": "start a message of several lines; a line !end sends it",
    "/exit": "end the session (also /quit or Ctrl-D)",
}


class ChatSession:
    """One chat: the agent, where its output goes, and what each slash command does.

    ``ask`` sends a message and shows the answer (the renderer streams it as it arrives);
    ``command`` runs a slash command and returns ``False`` when the session should end.
    """

    def __init__(
        self,
        agent: YiemAgent,
        renderer: Renderer,
        max_turns: int,
        tools: Tools,
        approver: Approver | None = None,
    ) -> None:
        self.agent = agent
        self.out = renderer
        self.max_turns = max_turns
        self.tools = tools
        self.approver = approver if approver is not None else Approver(renderer.write)

    def note(self, text: str, style: str = "2") -> None:
        """Show a line of the session's own (not the model's), dimmed by default."""
        self.out.line(self.out.style.paint(text, style))

    def ask(self, text: str) -> None:
        """Send ``text`` and wait for the answer, asking about the calls that wait for
        approval on the way; Ctrl-C aborts the run, not the session."""
        self.agent.run_agent(text)

        def wait() -> AssistantMessage:
            return wait_for_response(
                self.agent, lambda: self.note("stopping the answer (Ctrl-C again quits)", "33")
            )

        response = settle_approvals(self.agent, wait(), self.approver, wait)
        problem = failure(response, self.max_turns)
        if (
            problem is None
            and not answer_text(response).strip()
            and (response.stop_reason != "tool_use_terminated")
        ):
            problem = "(the model's reply was empty; ask again, or try another model with --model)"
        if problem is not None:
            self.note(problem, "31")
        self.out.end_line()

    def command(self, line: str) -> bool:
        """Run the slash command ``line``; return ``False`` for ``/exit`` and ``/quit``."""
        name, _, arg = line.partition(" ")
        arg = arg.strip()
        handlers: dict[str, Callable[[str], None]] = {
            "/tools": self.show_tools,
            "/reset": self.reset,
            "/save": self.save,
            "/load": self.load,
            "/help": self.help,
        }
        if name in ("/exit", "/quit"):
            return False
        handler = handlers.get(name)
        if handler is None:
            self.note(
                f"unknown command {name}; /help lists the commands (start a message with "
                "// to send it with one leading /)",
                "31",
            )
        else:
            handler(arg)
        return True

    def show_tools(self, _arg: str) -> None:
        """``/tools``: each tool with its label and description, on one line."""
        width = self.out.width()
        for tool in self.agent.tools.values():
            name = one_line(tool.name, 64)
            origin = f" ({one_line(self.tools.origin(tool.name), 60)})"
            summary = one_line(f"{tool.label} - {tool.description}", width - len(name) - len(origin))
            self.out.line(f"  {name}: {summary}" + self.out.style.paint(origin, "2"))
        self.note(f"  files from {self.tools.label}")

    def reset(self, _arg: str) -> None:
        """``/reset``: clear the history."""
        self.agent.reset()
        self.note("new conversation: the history is cleared")

    def save(self, arg: str) -> None:
        """``/save FILE``: write the session to ``FILE``."""
        if not arg:
            self.note("usage: /save FILE", "31")
            return
        path = os.path.expanduser(arg)
        try:
            self.agent.save(path)
        except (OSError, ValueError) as exc:  # ValueError: a NUL character in the name
            self.note(f"cannot save to {arg!r}: {getattr(exc, 'strerror', None) or exc}", "31")
            return
        self.note(f"saved {len(self.agent.messages)} messages to {arg}")

    def load(self, arg: str) -> None:
        """``/load FILE``: replace the conversation (history, system prompt, session id) with
        the one saved in ``FILE``."""
        if not arg:
            self.note("usage: /load FILE", "31")
            return
        path = os.path.expanduser(arg)
        try:
            if _not_a_file(path):  # a device or a pipe could be read for ever
                raise SessionError(f"{path}: not a file; /load reads a file saved with /save")
            data = load_session(path)
        except (SessionError, OSError, ValueError) as exc:
            self.note(f"cannot load {arg!r}: {exc}", "31")
            return
        self.agent.messages = data.messages
        self.agent.system_prompt = data.system_prompt
        self.agent.session_id = data.session_id
        self.note(f"loaded {len(data.messages)} messages from {arg}; the conversation goes on from there")

    def help(self, _arg: str) -> None:
        """``/help``: the commands and keys."""
        for usage, what in COMMANDS.items():
            self.out.line(f"  {usage:<12} {what}")
        self.note("  Ctrl-C stops the current answer; anything else is a message to the agent")


def _not_a_file(path: str) -> bool:
    """Whether ``path`` exists but is no regular file (a folder, a device, a pipe), following
    links; ``ValueError`` for a name ``open`` would refuse too (a NUL character)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False  # missing or unreadable: load_session says which


def _tolerant_input() -> None:
    """Let ``input()`` replace bytes that are not text in stdin's encoding (a terminal set to
    another one, a binary file piped in) instead of ending the chat with a traceback."""
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if callable(reconfigure):
        with contextlib.suppress(ValueError, OSError):
            reconfigure(errors="replace")


def _line_editing() -> None:
    """Turn on line editing and history for ``input()`` when a person types (stdin is a
    terminal) and the platform has ``readline``."""
    if sys.stdin.isatty():
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (importing it is what enables it)


def run_chat(
    agent: YiemAgent,
    renderer: Renderer,
    choice: ModelChoice,
    tools: Tools,
    max_turns: int,
    approver: Approver | None = None,
) -> int:
    """Run the chat until ``/exit`` or end of input; return the exit status (0)."""
    session = ChatSession(agent, renderer, max_turns, tools, approver)
    style = renderer.style
    renderer.line(
        style.paint("yiemagent chat", "1")
        + style.paint(
            f" {style.dot} model {choice.spec} ({choice.reason}) {style.dot} tools: "
            f"{one_line(', '.join(agent.tools), 400)}",
            "2",
        )
    )
    session.note(
        "/help lists the commands; !multi starts a message of several lines; Ctrl-C "
        "stops an answer; /exit or Ctrl-D quits"
    )
    _tolerant_input()
    _line_editing()
    with _bracketed_paste(renderer):
        return _converse(session, renderer)


def _converse(session: ChatSession, renderer: Renderer) -> int:
    """Read messages and commands until ``/exit`` or the end of input; return 0."""
    while True:
        renderer.end_line()
        try:
            message = read_message(input, renderer.write)
        except EOFError:
            renderer.write("\n")
            return 0
        except KeyboardInterrupt:
            renderer.write("\n")
            session.note("(/exit or Ctrl-D quits)")
            continue
        except OSError as exc:  # the terminal went away (EIO after a hang-up), a broken stdin
            renderer.write("\n")
            raise CliError(f"chat could not read its input any more ({describe_error(exc)})", 1) from None
        if message is None:
            continue
        if not sys.stdin.isatty():  # nothing echoed the lines: show them, for a readable transcript
            renderer.write(message + "\n")
        if "\n" not in message and message.startswith("/") and not message.startswith("//"):
            if not session.command(message):
                return 0
            continue
        session.ask(message[1:] if message.startswith("//") else message)


def read_message(read_line: Callable[[str], str], write: Callable[[str], None]) -> str | None:
    """The next message: one line; the lines between ``!multi`` and ``!end``; or, in a terminal
    with bracketed paste, everything pasted at once (several lines are one message). ``None``
    for a blank line. ``EOFError`` at the end of input; inside ``!multi``, the end of input ends
    the message instead."""
    line = read_line(PROMPT)
    if line.strip() == MULTI_START:
        lines: list[str] = []
        try:
            while (more := read_line(MULTI_PROMPT)).strip() != MULTI_END:
                lines.append(more)
        except EOFError:
            write("\n")
        text = "\n".join(lines).strip("\n")
        return text if text.strip() else None
    if PASTE_START in line:
        text = line.replace(PASTE_START, "")
        while PASTE_END not in text:
            try:
                text += "\n" + read_line("")
            except EOFError:
                break
        line = text.replace(PASTE_END, "")
    line = line.strip()
    return line or None


@contextlib.contextmanager
def _bracketed_paste(renderer: Renderer) -> Iterator[None]:
    """Ask the terminal to mark pasted text (so that a paste of several lines is one message)
    while the chat runs, when a person types into a terminal that can do it."""
    wanted = (
        sys.stdin.isatty() and renderer.stream.isatty() and os.environ.get("TERM", "") not in ("", "dumb")
    )
    if wanted:
        renderer.write(PASTE_ON)
    try:
        yield
    finally:
        if wanted:
            with contextlib.suppress(OSError, ValueError):
                renderer.write(PASTE_OFF)
