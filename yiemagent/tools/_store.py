"""Per-agent tool stores and the tool-file loader (spec sections 1, 4 and 17).

A ``ToolStore`` holds an ordered ``name -> AgentTool`` mapping. ``load_tools`` fills it from a
folder of tool files: every ``.py`` file (sorted by name, skipping files whose name starts with
``_`` or contains ``registry``) runs in a fresh module of its own, with the core types injected,
and its ``get_tool()`` must return an ``AgentTool``. Calling ``load_tools`` again re-executes the
files that changed, adds new ones and drops the tools whose file is gone. ``list_tool`` builds the
``listTools`` tool through which the model discovers what the store holds.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import logging
import os
import re
import stat
import sys
import threading
import traceback
import types
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import attrs

from yiemagent.core._content import AgentToolCall, ImageContent, MessageContent, TextContent, ThinkingContent
from yiemagent.core._messages import LlmUsage
from yiemagent.core._tools import AbortSignal, AgentTool, AgentToolResult
from yiemagent.errors import ToolLoadError, reraise_interrupt

__all__ = [
    "LIST_TOOLS_NAME",
    "ToolLoadError",
    "ToolStore",
    "check_tool_file",
    "clear_tools",
    "get_tools",
    "is_tool_file_name",
    "list_tool",
    "load_tool_file",
    "load_tools",
    "register_tool",
    "unregister_tool",
]

logger = logging.getLogger("yiemagent")

LIST_TOOLS_NAME = "listTools"
MODULE_PREFIX = "yiemagent_tools"
_STORE_SERIAL = itertools.count(1)


class _FileProblem(Exception):
    """Internal: why one tool file could not be loaded (the message is shown to people)."""


@attrs.define(frozen=True)
class _FileRecord:
    """What the store remembers about a loaded file: its content hash, tool and module."""

    path: str
    digest: str
    tool_name: str
    tool: AgentTool
    module_name: str


def _tools_repr(tools: dict[str, AgentTool]) -> str:
    return "[" + ", ".join(tools) + "]"


@attrs.define(eq=False)
class ToolStore:
    """An isolated, ordered set of tools for one agent (spec ``toolStore``).

    ``tools`` maps names to tools in registration order and is shared, never copied, by
    ``get_tools``. ``folder`` is the folder ``load_tools`` last loaded (``writeTool`` writes
    there). ``lock`` is held while the store changes; hold it to make a check-then-register
    sequence atomic. Stores share nothing with each other. Its tool modules live in
    ``sys.modules`` under ``module_namespace()`` until the store is garbage-collected (a tool
    file that keeps the store in a module global keeps them there for good). ``close()``, or
    leaving a ``with`` block, releases what ``add_closer`` registered (MCP server connections).
    """

    name: str = "default"
    tools: dict[str, AgentTool] = attrs.field(factory=dict, repr=_tools_repr)
    folder: str | None = None
    lock: threading.RLock = attrs.field(factory=threading.RLock, init=False, repr=False)
    _files: dict[str, _FileRecord] = attrs.field(factory=dict, init=False, repr=False)
    _namespace: str = attrs.field(default="", init=False, repr=False)
    _closers: list[Callable[[], None]] = attrs.field(factory=list, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        slug = re.sub(r"\W", "_", self.name) or "store"
        self._namespace = f"{MODULE_PREFIX}.{slug}_{next(_STORE_SERIAL)}"
        # Not a method or closure of the store: the finalizer must not keep the store alive.
        weakref.finalize(self, _drop_modules, self._namespace)

    def register(self, tool: AgentTool) -> AgentTool:
        """Same as ``register_tool(self, tool)``."""
        return register_tool(self, tool)

    def get_tools(self) -> dict[str, AgentTool]:
        """Same as ``get_tools(self)``."""
        return self.tools

    def unregister(self, name: str, tool: AgentTool | None = None) -> bool:
        """Same as ``unregister_tool(self, name, tool)``."""
        return unregister_tool(self, name, tool)

    def clear(self) -> None:
        """Same as ``clear_tools(self)``."""
        clear_tools(self)

    def add_closer(self, closer: Callable[[], None]) -> Callable[[], None]:
        """Have ``close()`` call ``closer()``, and return a function that takes it back.

        Whatever keeps resources for the store's tools (an MCP server connection) registers its
        own ``close`` here, so closing the store (or leaving its ``with`` block) releases them.
        """
        with self.lock:
            self._closers.append(closer)

        def remove() -> None:
            with self.lock:
                if closer in self._closers:
                    self._closers.remove(closer)

        return remove

    def close(self) -> None:
        """Call every closer added with ``add_closer``, the last added first, and forget them.

        One that raises is logged and the others still run, so ``close`` never raises. Idempotent;
        the store stays usable, holding whatever tools the closers left in it.
        """
        with self.lock:
            closers, self._closers = self._closers, []
        for closer in reversed(closers):
            try:
                closer()
            except BaseException as exc:  # one broken closer must not keep the others open
                reraise_interrupt(exc)
                logger.exception("a closer of tool store %r raised", self.name)

    def __enter__(self) -> ToolStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def load(self, folder: str | os.PathLike[str], strict: bool = True) -> dict[str, AgentTool]:
        """Same as ``load_tools(self, folder, strict)``."""
        return load_tools(self, folder, strict)

    def list_tool(self) -> AgentTool:
        """Same as ``list_tool(self)``."""
        return list_tool(self)

    def source_of(self, tool_name: str) -> str | None:
        """Return the path of the loaded file that defines ``tool_name``, or ``None``."""
        with self.lock:
            for record in self._files.values():
                if record.tool_name == tool_name:
                    return record.path
        return None

    def module_namespace(self) -> str:
        """Return the ``sys.modules`` prefix under which this store's tool modules live (fixed
        when the store is made, from its name and a serial number)."""
        return self._namespace


def _drop_modules(namespace: str) -> None:
    """Remove the package ``namespace`` and every module under it from ``sys.modules``."""
    for name in [n for n in list(sys.modules) if n == namespace or n.startswith(f"{namespace}.")]:
        sys.modules.pop(name, None)


def register_tool(store: ToolStore, tool: AgentTool) -> AgentTool:
    """Add ``tool`` to ``store`` under its name and return it.

    A new name goes last; an existing name is replaced in place (same position). A name
    registered here is taken: a reload never drops the tool, and a tool file giving the same name
    is reported as a load problem (also when the file loaded first: replacing its tool here
    forgets the file, so the next load reports it). Raises ``TypeError`` if ``tool`` is not an
    ``AgentTool``.
    """
    if not isinstance(tool, AgentTool):
        raise TypeError(f"register_tool expects an AgentTool, got {type(tool).__name__}")
    with store.lock:
        owner = _file_giving(store, store.tools.get(tool.name))
        if owner is not None:  # the file no longer gives a tool; its tool is replaced in place
            del store._files[owner.path]
            sys.modules.pop(owner.module_name, None)
        store.tools[tool.name] = tool
    return tool


def unregister_tool(store: ToolStore, name: str, tool: AgentTool | None = None) -> bool:
    """Remove the tool named ``name`` from ``store`` and return whether one was removed.

    With ``tool`` given, only that very tool is removed: a tool registered since under the same
    name stays (so a connection removing its own tools never removes someone else's). A tool given
    by a loaded file is forgotten with its file, which the next ``load_tools`` loads again.
    """
    with store.lock:
        current = store.tools.get(name)
        if current is None or (tool is not None and current is not tool):
            return False
        owner = _file_giving(store, current)
        if owner is not None:
            del store._files[owner.path]
            sys.modules.pop(owner.module_name, None)
        del store.tools[name]
    return True


def _file_giving(store: ToolStore, tool: AgentTool | None) -> _FileRecord | None:
    """Return the record of the loaded file whose tool is ``tool`` (by identity), or ``None``."""
    if tool is None:
        return None
    return next((r for r in store._files.values() if r.tool is tool), None)


def _held_by_hand(store: ToolStore, name: str) -> bool:
    """Whether ``name`` belongs to a tool registered by hand rather than given by a loaded file."""
    tool = store.tools.get(name)
    return tool is not None and name != LIST_TOOLS_NAME and _file_giving(store, tool) is None


def get_tools(store: ToolStore) -> dict[str, AgentTool]:
    """Return the store's own ``name -> AgentTool`` mapping (not a copy), in registration order."""
    return store.tools


def clear_tools(store: ToolStore) -> None:
    """Remove every tool from ``store`` and forget its loaded files and their modules.

    The next ``load_tools`` re-executes every file. ``store.folder`` is kept; other stores are
    untouched.
    """
    with store.lock:
        for record in store._files.values():
            sys.modules.pop(record.module_name, None)
        store._files.clear()
        store.tools.clear()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def list_tool(store: ToolStore) -> AgentTool:
    """Return the ``listTools`` tool bound to ``store``.

    Its result lists ``- name: label — description`` for every tool in the store at call time,
    in registration order, under the heading ``Available tools:``; ``details["tools"]`` holds the
    names. It takes no arguments and never fails.
    """

    def execute(_tool_call_id: str, _args: dict[str, Any], _signal: Any, _on_partial: Any) -> AgentToolResult:
        tools = list(store.tools.values())
        lines = [f"- {t.name}: {_one_line(t.label)} — {_one_line(t.description)}" for t in tools]
        text = "Available tools:\n" + ("\n".join(lines) if lines else "(none)")
        return AgentToolResult([TextContent(text)], {"tools": [t.name for t in tools]})

    return AgentTool(
        name=LIST_TOOLS_NAME,
        label="List Tools",
        description=(
            "List every tool you can call, with its label and description. Call it to discover "
            "tools, and before creating a new tool to avoid a name that is already taken."
        ),
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        execute=execute,
        parallel_tool_execute=True,
    )


# ---------------------------------------------------------------------------------------------
# Running one tool file
# ---------------------------------------------------------------------------------------------


def core_namespace() -> dict[str, Any]:
    """Return the names injected into every tool module before its code runs: the core types."""
    return {
        "AbortSignal": AbortSignal,
        "AgentTool": AgentTool,
        "AgentToolCall": AgentToolCall,
        "AgentToolResult": AgentToolResult,
        "ImageContent": ImageContent,
        "LlmUsage": LlmUsage,
        "MessageContent": MessageContent,
        "TextContent": TextContent,
        "ThinkingContent": ThinkingContent,
        "ToolStore": ToolStore,
    }


def is_tool_file_name(filename: str) -> bool:
    """True for names ``load_tools`` loads: ``*.py``, not starting with ``_``, without ``registry``."""
    return filename.endswith(".py") and not filename.startswith("_") and "registry" not in filename


def _line_in(exc: BaseException, path: str) -> int | None:
    """Return the last line of ``path`` in the traceback of ``exc`` (where the file failed)."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == path:
            line = frame.lineno
    return line


def _describe(exc: BaseException, path: str, doing: str) -> str:
    """Say what ``exc`` was, where in ``path`` it was raised and while ``doing`` what."""
    line = _line_in(exc, path)
    where = f" at line {line}" if line is not None else ""
    kind = "import error" if isinstance(exc, ImportError) else f"{type(exc).__name__}"
    text = str(exc)
    message = f"{kind}{where} {doing}: {text}" if text else f"{kind}{where} {doing}"
    if isinstance(exc, SystemExit):
        message += " (a tool file must not call sys.exit() or exit(); raise an exception instead)"
    return message


def _compile(source: bytes, path: str) -> types.CodeType:
    try:
        return compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        text = (exc.text or "").strip()
        shown = f": {text}" if text else ""
        raise _FileProblem(f"syntax error at line {exc.lineno}: {exc.msg}{shown}") from None
    except ValueError as exc:  # e.g. null bytes in the source
        raise _FileProblem(f"cannot be compiled: {exc}") from None
    except (RecursionError, MemoryError) as exc:  # an expression nested too deeply for the compiler
        raise _FileProblem(
            f"cannot be compiled: {type(exc).__name__} ({exc or 'out of memory'}); "
            "the code nests too deeply, split long expressions into several statements"
        ) from None


def _call_get_tool(get_tool: Any, store: ToolStore | None) -> Any:
    """Call ``get_tool(store)`` if it declares a positional parameter, else ``get_tool()``."""
    try:
        params = inspect.signature(get_tool).parameters.values()
    except (TypeError, ValueError):
        return get_tool()
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return get_tool(store) if positional else get_tool()


def _ensure_packages(package: str) -> None:
    """Register ``package`` and its parents in ``sys.modules`` as empty namespace packages.

    ``import a.b.c`` (which pickle does to find a class) needs ``a`` and ``a.b`` there too.
    """
    parts = package.split(".")
    for end in range(1, len(parts) + 1):
        name = ".".join(parts[:end])
        if name not in sys.modules:
            parent = types.ModuleType(name)
            parent.__path__ = []
            sys.modules.setdefault(name, parent)


def _execute_file(
    path: str, source: bytes, module_name: str, store: ToolStore | None
) -> tuple[types.ModuleType, AgentTool]:
    """Run ``source`` in a fresh module named ``module_name`` and return it with its tool.

    The module is in ``sys.modules`` while the file runs (so dataclasses work, and so does
    pickling what the file defines, its parent packages being registered too) and stays there on
    success; on failure it is removed and ``_FileProblem`` says why. Whatever the file raises,
    ``SystemExit`` and other ``BaseException``s included, becomes that ``_FileProblem``; only
    ``KeyboardInterrupt`` propagates. (``os._exit`` or an endless loop cannot be caught here.)
    """
    code = _compile(source, path)
    module = types.ModuleType(module_name)
    module.__file__ = path
    module.__package__ = module_name.rpartition(".")[0]
    module.__dict__.update(core_namespace())
    _ensure_packages(module.__package__)
    sys.modules[module_name] = module
    try:
        try:
            exec(code, module.__dict__)
        except BaseException as exc:  # SystemExit & co. too: one file must not end the load
            reraise_interrupt(exc)
            raise _FileProblem(_describe(exc, path, "while running the file")) from None
        get_tool = module.__dict__.get("get_tool")
        if not callable(get_tool):
            raise _FileProblem(
                "defines no get_tool() function; a tool file must define get_tool() returning an AgentTool"
            )
        try:
            tool = _call_get_tool(get_tool, store)
        except BaseException as exc:
            reraise_interrupt(exc)
            raise _FileProblem(_describe(exc, path, "in get_tool()")) from None
        if not isinstance(tool, AgentTool):
            raise _FileProblem(f"get_tool() returned {type(tool).__name__}; it must return an AgentTool")
    except BaseException:
        if sys.modules.get(module_name) is module:
            del sys.modules[module_name]
        raise
    return module, tool


def _read(path: str, follow_symlinks: bool = True) -> bytes:
    """Return the bytes of the regular file ``path``; raise ``_FileProblem`` when it cannot be read.

    With ``follow_symlinks`` false, a symbolic link is refused even if it replaced the file
    after the folder was listed: ``O_NOFOLLOW`` makes the refusal part of the ``open``.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in must not block the load
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_symlinks and os.path.islink(path):
            raise _FileProblem("is a symbolic link; links in a tool folder are not followed") from None
        raise _FileProblem(f"cannot be read: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise _FileProblem("is not a regular file")
            return handle.read()
    except OSError as exc:
        raise _FileProblem(f"cannot be read: {exc.strerror or exc}") from None


def check_tool_file(path: str | os.PathLike[str], store: ToolStore | None = None) -> AgentTool:
    """Run a tool file in a throwaway module and return the tool its ``get_tool()`` gives.

    Nothing is registered and no module is left in ``sys.modules``. Raises ``ToolLoadError``
    (with one problem) when the file cannot be loaded; used to vet a file before installing it.
    """
    file_path = os.path.abspath(os.fspath(path))
    module_name = f"{MODULE_PREFIX}._check_{uuid.uuid4().hex}"
    try:
        _module, tool = _execute_file(file_path, _read(file_path), module_name, store)
    except _FileProblem as exc:
        raise ToolLoadError([(file_path, str(exc))]) from None
    finally:
        sys.modules.pop(module_name, None)
    return tool


# ---------------------------------------------------------------------------------------------
# Loading a folder
# ---------------------------------------------------------------------------------------------


@attrs.define
class _Candidate:
    """A file executed during this load, waiting to be registered; ``previous`` is the module
    its module name held before (a changed file's old module), put back if the load is
    interrupted."""

    path: str
    digest: str
    module: types.ModuleType
    tool: AgentTool
    previous: types.ModuleType | None = None


def _digest(source: bytes) -> str:
    return hashlib.sha256(source).hexdigest()


def _module_name_for(store: ToolStore, path: str) -> str:
    """Return the module name of ``path`` in ``store``: stable for a file, unique in the store."""
    record = store._files.get(path)
    if record is not None:
        return record.module_name
    stem = re.sub(r"\W", "_", Path(path).stem) or "tool"
    base = f"{store.module_namespace()}.{stem}"
    taken = {r.module_name for r in store._files.values()}
    if base not in taken:
        return base
    return next(f"{base}_{n}" for n in itertools.count(2) if f"{base}_{n}" not in taken)


def _forget(store: ToolStore, path: str) -> None:
    """Drop a file's record, its module, and its tool if the store still holds that very tool."""
    record = store._files.pop(path, None)
    if record is None:
        return
    sys.modules.pop(record.module_name, None)
    if store.tools.get(record.tool_name) is record.tool:
        del store.tools[record.tool_name]


_LINK_OUT = (
    "is a symbolic link that leads outside the tool folder; such links are not followed. "
    "Copy the tool file into the folder instead of linking to it"
)


def _inside(root: str, path: str) -> bool:
    """Whether the real location of ``path`` is within the folder ``root`` (a real path)."""
    real = os.path.realpath(path)
    try:
        return real != root and os.path.commonpath([root, real]) == root
    except ValueError:  # on another drive (Windows)
        return False


def _tool_files(root: str, problems: list[tuple[str, str]]) -> list[str]:
    """Return the loadable tool files of ``root``, sorted by file name: regular files only.

    Symbolic links are never followed. One that leads out of ``root`` is recorded in
    ``problems`` (without its target: neither its content nor where it points is shown). One
    that stays inside ``root`` is skipped: the file it names is loaded under its own name when
    it is a tool file, and loading it through the link too would define its tool twice.
    """
    paths: list[str] = []
    with os.scandir(root) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if not is_tool_file_name(entry.name):
                continue
            if entry.is_symlink():
                if _inside(root, entry.path):
                    logger.info("tool file %s is a symbolic link within the tool folder; skipped", entry.path)
                else:
                    problems.append((entry.path, _LINK_OUT))
            elif entry.is_file(follow_symlinks=False):
                paths.append(entry.path)
    return paths


def _execute_changed(store: ToolStore, paths: list[str], problems: list[tuple[str, str]]) -> list[_Candidate]:
    """Return a candidate for every new or changed file; record problems and forget failed files.

    If a ``KeyboardInterrupt`` (the one exception a tool file may raise through the loader) stops
    the load, the modules executed so far are taken back out of ``sys.modules`` (a changed file's
    old module is put back) before it propagates, so the store and its modules stay as they were.
    """
    candidates: list[_Candidate] = []
    running: tuple[str, types.ModuleType | None] | None = None  # the file being executed
    try:
        for path in paths:
            running = None
            try:
                source = _read(path, follow_symlinks=False)
                digest = _digest(source)
                record = store._files.get(path)
                if record is not None and record.digest == digest:
                    continue
                module_name = _module_name_for(store, path)
                running = (module_name, sys.modules.get(module_name))
                module, tool = _execute_file(path, source, module_name, store)
            except _FileProblem as exc:
                problems.append((path, str(exc)))
                _forget(store, path)
                continue
            candidates.append(_Candidate(path, digest, module, tool, running[1]))
        running = None
    except BaseException:
        undo = [(c.module.__name__, c.previous) for c in candidates]
        if running is not None:
            undo.append(running)
        for module_name, previous in reversed(undo):
            if previous is None:
                sys.modules.pop(module_name, None)
            else:
                sys.modules[module_name] = previous
        raise
    return candidates


def _register_candidates(
    store: ToolStore, candidates: list[_Candidate], problems: list[tuple[str, str]]
) -> None:
    """Register executed files in order, refusing a tool name that another file already gives
    or that a tool registered by hand holds."""
    rerun = {c.path for c in candidates}
    owners = {r.tool_name: r.path for r in store._files.values() if r.path not in rerun}
    for cand in candidates:
        name = cand.tool.name
        owner = owners.get(name)
        if name == LIST_TOOLS_NAME:
            problem = f'defines a tool named "{name}", a name reserved for the built-in tool list'
        elif owner is not None and owner != cand.path:
            problem = f'defines tool "{name}", which {owner} already defines; tool names must be unique'
        elif owner is None and _held_by_hand(store, name):
            problem = (
                f'defines tool "{name}", a name already taken by a tool registered by hand '
                "(register_tool); rename the tool or unregister the other one"
            )
        else:
            problem = None
        if problem is not None:
            problems.append((cand.path, problem))
            sys.modules.pop(cand.module.__name__, None)
            _forget(store, cand.path)
            continue
        old = store._files.get(cand.path)
        if old is not None and old.tool_name != name and store.tools.get(old.tool_name) is old.tool:
            del store.tools[old.tool_name]
        store.tools[name] = cand.tool
        store._files[cand.path] = _FileRecord(cand.path, cand.digest, name, cand.tool, cand.module.__name__)
        owners[name] = cand.path


def _ensure_list_tool(store: ToolStore) -> None:
    """Keep (or add) ``listTools`` and move it last, so it follows every loaded tool."""
    existing = store.tools.pop(LIST_TOOLS_NAME, None)
    store.tools[LIST_TOOLS_NAME] = existing if existing is not None else list_tool(store)


def _report(problems: list[tuple[str, str]], store: ToolStore, strict: bool) -> None:
    if not problems:
        return
    if strict:
        raise ToolLoadError(problems, store.tools)
    for path, message in problems:
        logger.warning("tool file %s was not loaded: %s", path, message)


def load_tools(store: ToolStore, folder: str | os.PathLike[str], strict: bool = True) -> dict[str, AgentTool]:
    """Load every tool file of ``folder`` into ``store`` and return ``get_tools(store)``.

    Files load in sorted order; those starting with ``_`` or containing ``registry`` are skipped,
    and so are symbolic links, which are never followed (one leading out of the folder is a
    load problem).
    Again on the same folder, changed files are re-executed, new ones added and the tools of
    removed (or now failing) files dropped; tools registered by hand stay, and a file giving
    one of their names is a load problem. ``listTools`` is
    registered (or kept) last. Bad files never stop the good ones: their problems are raised
    together as one ``ToolLoadError`` afterwards, or logged when ``strict`` is false. Raises
    ``NotADirectoryError`` if ``folder`` is not a directory.
    """
    root = os.path.realpath(os.fspath(folder))
    if not os.path.isdir(root):
        raise NotADirectoryError(f"tool folder {os.fspath(folder)!r} does not exist or is not a directory")
    problems: list[tuple[str, str]] = []
    with store.lock:
        store.folder = root
        paths = _tool_files(root, problems)
        present = set(paths)
        for path in [p for p in store._files if os.path.dirname(p) == root and p not in present]:
            _forget(store, path)
        candidates = _execute_changed(store, paths, problems)
        _register_candidates(store, candidates, problems)
        _ensure_list_tool(store)
    problems.sort(key=lambda item: item[0])
    _report(problems, store, strict)
    return store.tools


def load_tool_file(store: ToolStore, path: str | os.PathLike[str]) -> AgentTool:
    """Load (or reload) one tool file into ``store`` and return its tool.

    The file is tracked like one loaded by ``load_tools`` (an unchanged file is not re-run by
    the next reload). Raises ``ToolLoadError`` when it cannot be loaded or gives a name that
    another file already defines.
    """
    file_path = os.path.realpath(os.fspath(path))
    problems: list[tuple[str, str]] = []
    with store.lock:
        candidates = _execute_changed(store, [file_path], problems)
        _register_candidates(store, candidates, problems)
        record = store._files.get(file_path)
    if problems or record is None:
        raise ToolLoadError(problems or [(file_path, "was not loaded")], store.tools)
    return record.tool
