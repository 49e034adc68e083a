"""How a history goes into chat messages (OpenAI's chat shape) where that shape has no place for
it: the one policy the spec's request view (``_spec_format``) and the OpenAI client's wire form
(``yiemagent.llm.openai._wire``) both apply, kept here so the two cannot drift apart.

A chat ``tool`` message carries text only: the images a tool returned go in a user turn of
their own (``tool_images_turn``), placed after the whole run of ``tool`` messages
(``with_image_turns_after_results``), and a result with no text gets a placeholder text
(``result_placeholder``). Images are ``image_url`` parts (``image_part``); a tool call's
arguments are JSON text, and text the model sent that is not JSON goes back exactly as it came
(``arguments_json``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from yiemagent.core._content import ImageContent
from yiemagent.core._json_text import to_json
from yiemagent.core._messages import AgentMessage, ToolResultMessage

__all__ = [
    "IMAGE_ONLY_RESULT",
    "NO_OUTPUT_RESULT",
    "arguments_json",
    "image_part",
    "result_placeholder",
    "tool_images_turn",
    "with_image_turns_after_results",
]

Chat = dict[str, Any]

IMAGE_ONLY_RESULT = "(see attached image)"  # a result of images only: they follow in a user turn
NO_OUTPUT_RESULT = "(no output)"  # a result with no content: providers reject an empty one


def result_placeholder(has_images: bool) -> str:
    """The text of a ``tool`` message for a result that has none: ``IMAGE_ONLY_RESULT`` when
    its images follow in a user turn, else ``NO_OUTPUT_RESULT``."""
    return IMAGE_ONLY_RESULT if has_images else NO_OUTPUT_RESULT


def image_part(block: ImageContent) -> Chat:
    """``block`` as an ``image_url`` part: its data as it is when it already is a URL (``data:``,
    ``http(s)://``), else a base64 ``data:`` URL of its MIME type."""
    url = block.data
    if not url.startswith(("data:", "http://", "https://")):
        url = f"data:{block.mime_type};base64,{url}"
    return {"type": "image_url", "image_url": {"url": url}}


def tool_images_turn(tool_name: str, images: list[Chat]) -> Chat:
    """The user message that carries the images (``image_url`` parts) tool ``tool_name``
    returned, which its ``tool`` message cannot."""
    intro = {"type": "text", "text": f"Image(s) returned by tool {tool_name}:"}
    return {"role": "user", "content": [intro, *images]}


def arguments_json(arguments: Any) -> str:
    """A tool call's ``arguments`` as JSON text; text (invalid JSON from the model) as it is."""
    if isinstance(arguments, str):
        return arguments
    return to_json(arguments)


def with_image_turns_after_results(
    messages: Iterable[AgentMessage], convert: Callable[[AgentMessage], list[Chat]]
) -> list[Chat]:
    """The chat messages of ``messages``, each converted by ``convert`` (a tool result to its
    ``tool`` message, then its images' user turn, if any); the user turns of images are held
    until the run of ``tool`` messages ends, since a user message between the results of one
    batch is a request providers reject."""
    out: list[Chat] = []
    held: list[Chat] = []
    for msg in messages:
        chat = convert(msg)
        if isinstance(msg, ToolResultMessage):
            out.append(chat[0])
            held.extend(chat[1:])
            continue
        if held:
            out.extend(held)
            held.clear()
        out.extend(chat)
    out.extend(held)
    return out
