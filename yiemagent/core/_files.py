"""Reading a file that may not be what its name says: regular files only, at most a given size,
and never a hang.

``--model scripted:/dev/zero`` would read for ever, a FIFO with no writer would block in
``open``, and a folder or a symlink loop would raise ``OSError`` from deep inside a loader. Here
the file is opened without blocking, checked to be a regular file, and read up to a limit;
anything else is an ``UnreadableFileError`` whose text says what is wrong (the caller names
the file).
"""

from __future__ import annotations

import os
import stat

from yiemagent.errors import UnreadableFileError

__all__ = ["UnreadableFileError", "read_regular_file"]

# Open without blocking (a FIFO with no writer) and without taking a terminal as ours.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(mode: int) -> str | None:
    """Why a file of ``mode`` is not one to read, or ``None`` for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "it is a folder, not a file"
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return f"it is {kind}, not a regular file"


def _too_large(limit: int) -> str:
    return f"it is larger than the limit of {limit:,} bytes ({limit / 2**20:g} MiB) for one file"


def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them. Raises
    ``UnreadableFileError`` for a folder, a FIFO, a device or a socket (refused without reading
    or blocking), a file over ``limit`` bytes (even one that grows while it is read) and any
    ``OSError`` (missing, no permission, a symlink loop)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise UnreadableFileError(f"cannot read the file: {exc.strerror or exc}") from None
    except ValueError:  # os.open refuses a name with a NUL character before asking the system
        raise UnreadableFileError("cannot read the file: its name holds a NUL character") from None
    try:
        info = os.fstat(fd)
        why = _not_regular(info.st_mode)
        if why is not None:
            raise UnreadableFileError(why)
        if info.st_size > limit:
            raise UnreadableFileError(_too_large(limit))
        with open(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)  # one byte more tells a file that grew past the limit
    except OSError as exc:
        raise UnreadableFileError(f"cannot read the file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UnreadableFileError(_too_large(limit))
    return data
