"""Text from outside the command (tool names and descriptions, MCP servers' results, the model's
replies) made safe to write to a terminal.

A terminal acts on escape sequences in what it is sent: it changes colours, clears the screen,
sets the window title, moves the cursor over what was written, or (in some terminals) writes to
the clipboard or answers back with input of its own. Whatever a tool or a server says must reach
the user as text only, so ``printable`` removes every escape sequence (7-bit and 8-bit) and every
other control character before the command writes it.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

_SEQUENCE = re.compile(
    r"\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC (title, hyperlink, clipboard), to BEL or ST
    r"|\x1b[P^_X][^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, PM, APC and SOS strings, to ST
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI (colours, cursor, erase)
    r"|\x1b[ -/]*[0-~]?"  # the other escape sequences (charset, reset, keypad, ...)
    r"|\x9d[^\x07\x1b\x9c]*(?:\x07|\x9c)?"  # 8-bit OSC
    r"|[\x90\x98\x9e\x9f][^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # 8-bit DCS, SOS, PM, APC
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
)
# What is left to remove: C0 controls but tab and line feed, DEL, and the C1 controls.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without escape sequences and control characters: tabs and line feeds stay, a
    ``\\r\\n`` becomes ``\\n``, anything else (a lone ``\\r``, which would let text overwrite
    what is on its line, included) is removed."""
    if text.isprintable():  # the common case: nothing to do
        return text
    return _CONTROL.sub("", _SEQUENCE.sub("", text.replace("\r\n", "\n")))
