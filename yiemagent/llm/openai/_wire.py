"""The form in which ``OpenAIChatClient`` sends messages: the one every OpenAI-compatible server takes.

The default formatter keeps the shapes of the spec (system and user content as lists of parts,
tool results as lists of text parts). OpenAI accepts them, but servers that copy its API often
accept less: llama-cpp-python's server rejects a system, assistant or tool message whose content
is not a string, and vLLM and Ollama differ on an assistant message with tool calls and no text.
So the client sends the narrowest common form: text-only content as one string (the parts of a
request were written apart, so they keep a line between them), a list of parts only when it
holds an image, and an assistant message with tool calls as ``content: ""`` plus ``tool_calls``
entries of ``type: function`` with JSON-string ``arguments``. Only the messages that change are
copied: the formatter's dicts are cached across turns and are never modified.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from yiemagent.llm._jsonutil import parts_text, to_json

__all__ = ["wire_message", "wire_messages"]


def _text_only(content: list[Any]) -> bool:
    """Whether every part of ``content`` is a text part (a list with an image must stay parts)."""
    return all(isinstance(p, Mapping) and p.get("type", "text") == "text"
               and isinstance(p.get("text"), str) for p in content)


def _wire_tool_call(call: Any) -> Any:
    """Return ``call`` as ``{"id", "type": "function", "function": {"name", "arguments": str}}``;
    the same object when it already is, anything unreadable as it is."""
    if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
        return call
    function = call["function"]
    arguments = function.get("arguments")
    if call.get("type") == "function" and isinstance(arguments, str):
        return call
    out = dict(call)
    out["type"] = "function"
    if not isinstance(arguments, str):  # servers parse the string themselves; objects they reject
        out["function"] = {**function, "arguments": to_json(arguments if arguments is not None
                                                             else {})}
    return out


def wire_message(message: Any) -> Any:
    """Return ``message`` in the form every OpenAI-compatible server accepts (see the module
    docstring); ``message`` itself when it needs no change, never a changed ``message``.

    Text-only content lists become one string; an assistant message with tool calls gets
    ``content: ""`` when it has no text and well-formed ``tool_calls``; anything that is not a
    message dict is returned as it is, for the server to judge.
    """
    if not isinstance(message, Mapping):
        return message
    content = message.get("content")
    role = message.get("role")
    changed: dict[str, Any] = {}
    if isinstance(content, list) and _text_only(content):
        changed["content"] = parts_text(content, "\n")
    calls = message.get("tool_calls")
    if role == "assistant" and calls:
        if content is None:  # llama-cpp-python takes only a string here; "" means "no text"
            changed["content"] = ""
        if isinstance(calls, list):
            wired = [_wire_tool_call(c) for c in calls]
            if any(w is not c for w, c in zip(wired, calls, strict=True)):
                changed["tool_calls"] = wired
    if not changed:
        return message
    return {**message, **changed}


def wire_messages(messages: Sequence[Any]) -> list[Any]:
    """Return a new list of ``messages`` in wire form (``wire_message`` on each)."""
    return [wire_message(m) for m in messages]
