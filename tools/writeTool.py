"""writeTool: let the model create a new tool at runtime (spec section 15, self-tooling).

The model gives a name, label, description, JSON Schema and the Python code of the tool's body;
writeTool checks everything, generates a tool file, loads that file in isolation, moves it into
the store's folder atomically and registers the tool, so the model can call it on its next turn.
Every refusal is an error result that says what is wrong and how to fix it; nothing is written
outside the store's folder, and no temporary file is left behind.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import keyword
import os
import pprint
import re
import stat
import sys
import textwrap
import uuid
from typing import Any

import attrs

from yiemagent import AbortSignal, AgentTool, AgentToolResult, TextContent, ToolStore, validate_required_args
from yiemagent.errors import ToolLoadError

# No public equivalents: the reserved name, vetting a file in isolation and loading one file.
from yiemagent.tools import check_tool_file, load_tool_file
from yiemagent.tools._store import LIST_TOOLS_NAME

NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# The first line of every file writeTool writes; overwrite=true replaces only files that carry it.
MARKER = "# Written by yiemagent's writeTool: overwrite=true may replace this file."
RESERVED_NAMES = frozenset({LIST_TOOLS_NAME, "writeTool"})
EXECUTE_PARAMS = "tool_call_id: str, args: dict[str, Any], signal: AbortSignal | None, on_partial_result: Any"
ARGS_PARAMS = "args: dict[str, Any]"
CODE_FIELDS = {  # field -> (the function it is the body of, as shown to the model; its parameters)
    "executeCode": ("execute_tool(tool_call_id, args, signal, on_partial_result)", EXECUTE_PARAMS),
    "validateCode": ("validate_required_args(args)", ARGS_PARAMS),
    "prepareCode": ("prepare_arguments(args)", ARGS_PARAMS),
}


class WriteToolRefused(ValueError):
    """writeTool will not write this tool; the message says why and what to change."""


@attrs.define(frozen=True)
class ToolSpec:
    """A checked request: everything needed to generate the tool file."""

    name: str
    label: str
    description: str
    input_schema: dict[str, Any]
    execute_code: str
    validate_code: str | None
    prepare_code: str | None
    parallel: bool
    overwrite: bool


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------


def _text(args: dict[str, Any], field: str) -> str:
    value = args.get(field)
    if not isinstance(value, str) or not value.strip():
        raise WriteToolRefused(f'"{field}" must be a non-empty string.')
    return value.strip()


def check_name(name: Any) -> str:
    """Return ``name`` if it can name a tool file; raise ``WriteToolRefused`` saying why not.

    A name is an ASCII identifier that starts with a letter, is not a Python keyword, is not
    reserved and would not be skipped by the loader (no ``registry``). So ``../x``, ``a/b`` and
    absolute paths are refused.
    """
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise WriteToolRefused(
            f'"name" must be a Python identifier of ASCII letters, digits and underscores that '
            f'starts with a letter, e.g. "searchWine"; got {name!r}. It becomes the file name '
            "<name>.py, so paths are not allowed."
        )
    if keyword.iskeyword(name):
        raise WriteToolRefused(f'"name" {name!r} is a Python keyword; choose another name.')
    if name in RESERVED_NAMES:
        raise WriteToolRefused(f'"name" {name!r} is reserved for a built-in tool; choose another name.')
    if "registry" in name:
        raise WriteToolRefused(
            f'"name" {name!r} contains "registry"; the tool loader skips such files. Choose another name.'
        )
    return name


def shadowed_module(name: str, folder: str | None = None) -> str | None:
    """Say which module a tool file ``<name>.py`` would shadow, or return ``None`` if none.

    Tool files are imported under a namespace of their own, but a folder of them placed on the
    import path (or a script run from it) would put ``<name>.py`` in the place of a module of the
    same name. So a name is taken by a standard-library module (``sys.stdlib_module_names``,
    built-in modules included), a top-level module an installed distribution declares
    (``importlib.metadata.packages_distributions()``), or a module or package Python can import
    now (``importlib.util.find_spec``, or already imported). A plain directory that would import
    as a namespace package does not count, nor does ``<name>.py`` itself in ``folder``.
    """
    if name in sys.stdlib_module_names:
        return "a module of Python's standard library"
    distributions = importlib.metadata.packages_distributions().get(name)
    if distributions:
        owners = ", ".join(dict.fromkeys(distributions))
        return f"a top-level module of the installed distribution {owners}"
    if name in sys.modules:
        return "a module Python can import (this program has imported it)"
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a finder that cannot tell: nothing found
        spec = None
    if spec is None or spec.origin is None:  # no origin: a namespace package, i.e. a directory
        return None
    if folder is not None and os.path.realpath(os.path.dirname(spec.origin)) == os.path.realpath(folder):
        return None
    return "a module Python can import"


def check_not_shadowing(name: str, folder: str | None) -> None:
    """Refuse (``WriteToolRefused``) a name that ``shadowed_module`` says shadows a module; the
    message says which kind of module and suggests a free name."""
    what = shadowed_module(name, folder)
    if what is None:
        return
    candidates = (f"{name}Tool", f"my{name[:1].upper()}{name[1:]}", f"{name}_tool")
    suggestion = next((c for c in candidates if shadowed_module(c, folder) is None), candidates[0])
    raise WriteToolRefused(
        f'"name" {name!r} is the name of {what}; a tool file {name}.py would be imported in its '
        f'place wherever the tool folder is on the import path. Choose another name, e.g. "{suggestion}".'
    )


def check_schema(schema: Any) -> dict[str, Any]:
    """Return ``schema`` if it is a valid JSON Schema for an object of arguments; else refuse."""
    if not isinstance(schema, dict):
        raise WriteToolRefused('"inputSchema" must be a JSON object (a JSON Schema).')
    try:
        json.dumps(schema, allow_nan=False)
    except (TypeError, ValueError):
        raise WriteToolRefused('"inputSchema" must contain only JSON values.') from None
    if schema.get("type") != "object":
        raise WriteToolRefused(
            '"inputSchema" must describe an object of arguments: set "type": "object" with '
            '"properties" and "required".'
        )
    try:
        validate_required_args({}, schema)  # raises ValueError only when the schema is invalid
        # A model's schema is as untrusted as an MCP server's: a pattern RE2 cannot run would
        # be matched by Python's re, whose backtracking can hold the process for good.
        AgentTool("writeTool_probe", "", "", schema, _never_runs, untrusted_schema=True)
    except ValueError as exc:
        message = str(exc).removeprefix('Tool "writeTool_probe": ')
        raise WriteToolRefused(
            f'"inputSchema" was refused: {message}. Fix the schema and call writeTool again.'
        ) from None
    return schema


def _never_runs(*_: Any) -> AgentToolResult:
    raise AssertionError("the probe tool only checks a schema")


def _statements(field: str, code: str) -> list[ast.stmt]:
    """Parse ``code`` (as given, or dedented when all of it is indented) into statements.

    Parsing, not re-indenting text, keeps multi-line string literals exactly as written. Raises
    ``SyntaxError`` with lines counted within ``field``, or ``WriteToolRefused`` when it has no
    statement.
    """
    try:
        tree = ast.parse(code, f"<{field}>")
    except IndentationError:
        tree = ast.parse(textwrap.dedent(code), f"<{field}>")
    if not tree.body:
        raise WriteToolRefused(f'"{field}" has no statements, only comments or blank lines.')
    return tree.body


def function_source(name: str, params: str, field: str, code: str) -> str:
    """Return the source of ``def name(params) -> Any:`` whose body is the parsed ``code``.

    The statements are placed in an ``ast.FunctionDef`` and unparsed, so string literals keep
    their content (comments are not kept). Raises ``SyntaxError`` when the body does not
    compile as a function body, with the line counted within ``field``.
    """
    function = ast.parse(f"def {name}({params}) -> Any:\n    pass\n").body[0]
    assert isinstance(function, ast.FunctionDef)
    function.body = _statements(field, code)
    module = ast.fix_missing_locations(ast.Module(body=[function], type_ignores=[]))
    compile(module, f"<{field}>", "exec", dont_inherit=True)  # e.g. 'await' outside async
    return ast.unparse(function)


def check_code(field: str, code: Any, required: bool) -> str | None:
    """Return the code of a function body if it compiles; ``None`` if optional and absent.

    ``field`` is ``executeCode``, ``validateCode`` or ``prepareCode``. The code is compiled as
    the body of its function; when it does not compile it is refused with the line (counted
    within ``field``) and the compiler's message.
    """
    if code is None or (isinstance(code, str) and not code.strip() and not required):
        return None
    if not isinstance(code, str) or not code.strip():
        raise WriteToolRefused(f'"{field}" must be a non-empty string of Python code.')
    function, params = CODE_FIELDS[field]
    try:
        function_source("_body", params, field, code)
    except SyntaxError as exc:
        shown = f" ({exc.text.strip()})" if exc.text and exc.text.strip() else ""
        raise WriteToolRefused(
            f'"{field}" does not compile: line {exc.lineno or 1}: {exc.msg}{shown}. It must be the '
            f"body of {function}, not wrapped in a function; fix it and call writeTool again."
        ) from None
    return code


def _flag(args: dict[str, Any], field: str) -> bool:
    value = args.get(field, False)
    if not isinstance(value, bool):
        raise WriteToolRefused(f'"{field}" must be true or false.')
    return value


def check_request(args: dict[str, Any]) -> ToolSpec:
    """Check every field of a writeTool call and return the ``ToolSpec``; refuse on the first problem."""
    return ToolSpec(
        name=check_name(args.get("name")),
        label=_text(args, "label"),
        description=_text(args, "description"),
        input_schema=check_schema(args.get("inputSchema")),
        execute_code=check_code("executeCode", args.get("executeCode"), True) or "",
        validate_code=check_code("validateCode", args.get("validateCode"), False),
        prepare_code=check_code("prepareCode", args.get("prepareCode"), False),
        parallel=_flag(args, "parallel"),
        overwrite=_flag(args, "overwrite"),
    )


def target_path(store: ToolStore, name: str) -> str:
    """Return ``<store folder>/<name>.py``, refusing anything that would land outside the folder.

    The folder is resolved, the file name is not: a ``<name>.py`` that is a symbolic link is
    refused, wherever it leads, because writing through it would change the file it points to
    (another tool's file, or one outside the folder) rather than the link.
    """
    if not store.folder:
        raise WriteToolRefused(
            "This agent's tool store has no folder to write to; it must be loaded with "
            "load_tools(store, folder) before writeTool can create tools."
        )
    folder = os.path.realpath(store.folder)
    target = os.path.join(folder, f"{name}.py")
    if os.path.dirname(target) != folder:
        raise WriteToolRefused(f'"name" {name!r} does not give a file inside the tool folder.')
    if os.path.islink(target):
        real = os.path.realpath(target)
        if os.path.dirname(real) == folder:
            where = f"to {os.path.basename(real)} in the tool folder"
        else:
            where = "that leads outside the tool folder, so it does not give a file inside the tool folder"
        raise WriteToolRefused(
            f"{name}.py is a symbolic link {where}; writeTool never writes through a symbolic "
            "link. Choose another name."
        )
    return target


def written_by_write_tool(path: str) -> bool:
    """Whether the regular file at ``path`` starts with ``MARKER``, i.e. writeTool wrote it (a
    symbolic link is never reported as written by writeTool, whatever it points to)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        with open(os.open(path, flags), encoding="utf-8", errors="replace") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return False
            return handle.readline().rstrip("\r\n") == MARKER
    except OSError:
        return False


def check_free(store: ToolStore, spec: ToolSpec, target: str) -> bool:
    """Refuse a name that is taken (unless ``overwrite``); return whether something is replaced.

    Taken means: a tool of that name in the store, a file of that name (in any letter case) in the
    folder. Even with ``overwrite``, only a file writeTool wrote (it starts with ``MARKER``) is
    replaced: never a hand-written file, a tool registered by hand or one another file defines.
    """
    name = spec.name
    existing = store.tools.get(name)
    folder = os.path.dirname(target)
    same_file = [f for f in os.listdir(folder) if f.lower() == f"{name}.py".lower()]
    if any(f != f"{name}.py" for f in same_file):
        raise WriteToolRefused(
            f"The tool folder already has {same_file[0]}, whose name differs from {name!r} only in "
            "letter case; choose another name."
        )
    if (existing is not None or same_file) and not spec.overwrite:
        what = f"{existing.label} — {existing.description}" if existing else f"file {name}.py"
        raise WriteToolRefused(
            f'A tool named "{name}" already exists ({what}). Choose another name (call listTools to '
            "see the names in use), or set overwrite to true to replace it."
        )
    source = store.source_of(name)
    if source is not None and os.path.realpath(source) != target:
        raise WriteToolRefused(
            f'Tool "{name}" is defined by {os.path.basename(source)}, not {name}.py; writeTool cannot '
            "replace it. Choose another name."
        )
    if existing is not None and source is None:
        raise WriteToolRefused(
            f'Tool "{name}" was registered by the program, not written by writeTool; writeTool '
            "cannot replace it. Choose another name."
        )
    if same_file and not written_by_write_tool(target):
        raise WriteToolRefused(
            f"{name}.py was not written by writeTool, and overwrite only replaces the files "
            "writeTool wrote; choose another name."
        )
    return existing is not None or bool(same_file)


# ---------------------------------------------------------------------------------------------
# The generated file
# ---------------------------------------------------------------------------------------------

_HEADER = """\
{marker}
{doc}

from __future__ import annotations

import json
from typing import Any

from yiemagent import AbortSignal, AgentTool, AgentToolResult, ImageContent, TextContent
from yiemagent import validate_required_args as schema_problems
from yiemagent.tools import to_tool_result{imports}

NAME = {name!r}
LABEL = {label!r}
DESCRIPTION = {description!r}
PARALLEL = {parallel!r}
INPUT_SCHEMA: dict[str, Any] = {schema}
"""

_EXECUTE = '''

{body}


def execute_tool({params}) -> AgentToolResult:
    """Run the tool's code and turn what it returns into a result."""{checks}
    value = _execute_body(tool_call_id, args, signal, on_partial_result)
    if value is None:
        raise ValueError(
            f"the code of tool {{NAME!r}} returned nothing; it must end with "
            "return <text, JSON-ready value or AgentToolResult>"
        )
    return to_tool_result(value, NAME)
'''

_RUN_CHECKS = """
    args = _checked_arguments(tool_call_id, args)"""

_VALIDATE = '''

{body}


def validate_required_args(args: dict[str, Any]) -> str | None:
    """Check the arguments against INPUT_SCHEMA, then run the tool's own checks."""
    problems = schema_problems(args, INPUT_SCHEMA)
    if problems:
        return "; ".join(line.strip().lstrip("- ") for line in problems.splitlines())
    problem = _validate_body(args)
    return None if problem is None or problem is True or problem == "" else str(problem)
'''

_PREPARE = '''

{body}


def prepare_arguments(args: dict[str, Any]) -> dict[str, Any]:
    """Run the tool's argument preparation; returning nothing keeps the (possibly changed) args."""
    value = _prepare_body(args)
    return args if value is None else value


def _checked_later(args: dict[str, Any]) -> str | None:
    """Accept the arguments while the call is prepared: prepare_arguments may still change them,
    and it runs with the schema check at the start of execute_tool (see _checked_arguments)."""
    return None
'''

# The tool's own prepare and validate code runs at the start of execute_tool, not while the call
# is prepared: the pipeline prepares and validates before before_tool_call, so a hook that blocks
# a call (an approval gate) would otherwise come too late to stop the model's code.
_CHECK_IMPORTS = """
from yiemagent import AgentToolCall, prepare_tool_call_arguments, validate_tool_arguments
from yiemagent.errors import ToolArgumentError, describe_error"""

_CHECKS = '''

_CHECKS = AgentTool(
    name=NAME,
    label=LABEL,
    description=DESCRIPTION,
    input_schema=INPUT_SCHEMA,
    execute=execute_tool,{hooks}
)


def _checked_arguments(tool_call_id: str, args: dict[str, Any]) -> dict[str, Any]:
    """Prepare and validate the arguments with this tool's own code, as the pipeline would have
    before before_tool_call; here it runs only once the hook let the call through. Raises
    ToolArgumentError with the message the pipeline would have given."""
    call = AgentToolCall(tool_call_id, NAME, args)
    try:
        return validate_tool_arguments(_CHECKS, prepare_tool_call_arguments(_CHECKS, call))
    except ToolArgumentError:
        raise
    except Exception as exc:
        raise ToolArgumentError(
            f'Preparing the arguments for tool "{{NAME}}" failed: {{describe_error(exc)}}'
        ) from exc
'''

_GET_TOOL = '''

def get_tool() -> AgentTool:
    """Return the tool defined by this file."""
    return AgentTool(
        name=NAME,
        label=LABEL,
        description=DESCRIPTION,
        input_schema=INPUT_SCHEMA,
        execute=execute_tool,{hooks}
        parallel_tool_execute=PARALLEL,
        untrusted_schema=True,  # a model wrote it: patterns RE2 cannot run are refused
    )
'''


def render_tool_file(spec: ToolSpec) -> str:
    """Return the Python source of the tool file for ``spec`` (the tool file contract).

    The file starts with ``MARKER``. The model's code becomes the bodies of ``execute_tool``,
    ``validate_required_args`` and ``prepare_arguments`` (built from its parsed statements, see
    ``function_source``); every value it gave (name, texts, schema) is embedded as a literal.
    The tool the file gives runs none of the model's code before ``execute``: its prepare and
    validate code run at the start of ``execute_tool``, after ``before_tool_call``, with the
    errors they would have given during preparation. While the call is prepared, the pipeline
    checks the schema (only validate code) or nothing (prepare code, which may change the
    arguments first).
    """
    doc = repr(f"{spec.label} ({spec.name}), a tool written by writeTool.\n\n{spec.description}\n")
    schema = pprint.pformat(spec.input_schema, width=100, sort_dicts=False)
    execute = function_source("_execute_body", EXECUTE_PARAMS, "executeCode", spec.execute_code)
    has_checks = spec.validate_code is not None or spec.prepare_code is not None
    parts = [
        _HEADER.format(
            marker=MARKER,
            doc=doc,
            name=spec.name,
            label=spec.label,
            description=spec.description,
            parallel=spec.parallel,
            schema=schema,
            imports=_CHECK_IMPORTS if has_checks else "",
        ),
        _EXECUTE.format(params=EXECUTE_PARAMS, body=execute, checks=_RUN_CHECKS if has_checks else ""),
    ]
    checks = ""
    offered = ""
    if spec.validate_code is not None:
        body = function_source("_validate_body", ARGS_PARAMS, "validateCode", spec.validate_code)
        parts.append(_VALIDATE.format(body=body))
        checks += "\n    validate_required_args=validate_required_args,"
    if spec.prepare_code is not None:
        body = function_source("_prepare_body", ARGS_PARAMS, "prepareCode", spec.prepare_code)
        parts.append(_PREPARE.format(body=body))
        checks += "\n    prepare_arguments=prepare_arguments,"
        offered = "\n        validate_required_args=_checked_later,"
    if has_checks:
        parts.append(_CHECKS.format(hooks=checks))
    parts.append(_GET_TOOL.format(hooks=offered))
    return "".join(parts)


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def _replaced_mode(target: str) -> int | None:
    """Return the permission bits of the regular file ``target`` names, or ``None`` if there is
    none (a symbolic link that appeared there meanwhile lends no mode: its own is always 0777)."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return None
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else None


def _write_temp(folder: str, name: str, text: str, target: str) -> str:
    """Write ``text`` to a new ``_writeTool_<name>_*.py`` file in ``folder`` (skipped by the loader).

    The file is created with mode ``0o666`` so the umask applies, as for any file a program
    writes (``mkstemp`` would leave it ``0o600`` after the move), then given the mode of the file
    it replaces, if any.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    while True:
        temp = os.path.join(folder, f"_writeTool_{name}_{uuid.uuid4().hex[:12]}.py")
        try:
            fd = os.open(temp, flags, 0o666)
            break
        except FileExistsError:  # a name clash of 48 random bits: pick another name
            continue
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        mode = _replaced_mode(target)
        if mode is not None:
            os.chmod(temp, mode)
    except BaseException:
        os.unlink(temp)
        raise
    return temp


def _vet(temp: str, store: ToolStore, name: str) -> None:
    """Load the temporary file in isolation; refuse unless ``get_tool()`` gives tool ``name``."""
    try:
        tool = check_tool_file(temp, store)
    except ToolLoadError as exc:
        problem = exc.problems[0][1] if exc.problems else str(exc)
        raise WriteToolRefused(
            f"The generated tool file does not load: {problem}. Fix the code and call writeTool again."
        ) from None
    if tool.name != name:
        raise WriteToolRefused(f"The generated tool file gives a tool named {tool.name!r}, not {name!r}.")


def install(store: ToolStore, spec: ToolSpec) -> tuple[AgentTool, str, bool]:
    """Write, vet, move into place and register the tool of ``spec``; return (tool, path, replaced).

    Holds the store's lock throughout, so the name check and the registration are atomic. The
    temporary file is removed on every failure; the target file changes only by ``os.replace``.
    """
    with store.lock:
        target = target_path(store, spec.name)
        replaced = check_free(store, spec, target)
        temp = _write_temp(os.path.dirname(target), spec.name, render_tool_file(spec), target)
        try:
            _vet(temp, store, spec.name)
            os.replace(temp, target)
        finally:
            if os.path.exists(temp):
                os.unlink(temp)
        try:
            tool = load_tool_file(store, target)
        except ToolLoadError as exc:
            raise WriteToolRefused(f"The tool file was written to {target} but did not load: {exc}") from None
    return tool, target, replaced


def write_tool(store: ToolStore, args: dict[str, Any]) -> AgentToolResult:
    """Create (or, with ``overwrite``, replace) the tool described by ``args`` in ``store``.

    Returns a result whose ``details["addedToolNames"]`` names the new tool and ``details["path"]``
    gives its file. Raises ``WriteToolRefused`` with a message for the model on any problem.
    """
    spec = check_request(args)
    check_not_shadowing(spec.name, store.folder)
    tool, path, replaced = install(store, spec)
    verb = "Replaced" if replaced else "Created"
    text = (
        f'{verb} tool "{tool.name}" ({tool.label}) in {path}. It is registered now: call '
        f"{tool.name} directly from your next step."
    )
    return AgentToolResult(
        [TextContent(text)], {"addedToolNames": [tool.name], "path": path, "replaced": replaced}
    )


INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "description": (
                "Tool name: letters, digits and underscores, starting with a letter (e.g. "
                "'searchWine'). Becomes the file <name>.py. Call listTools first to avoid names in use."
            ),
        },
        "label": {"type": "string", "description": "Human-readable tool name, e.g. 'Wine Search'."},
        "description": {"type": "string", "description": "What the tool does, shown to the model."},
        "inputSchema": {
            "type": "object",
            "description": (
                'JSON Schema of the tool\'s arguments: {"type": "object", "properties": {...}, '
                '"required": [...]}.'
            ),
        },
        "executeCode": {
            "type": "string",
            "description": (
                "Python code for the BODY of execute_tool(tool_call_id, args, signal, "
                "on_partial_result), not wrapped in a function. args is a dict of the validated "
                "arguments. End with `return` of a string, a JSON-ready value, or "
                "AgentToolResult([TextContent(...)], details). Import modules inside the code; "
                "json, TextContent, ImageContent and AgentToolResult are available."
            ),
        },
        "validateCode": {
            "type": "string",
            "description": (
                "Optional Python code for the body of validate_required_args(args), run after "
                "the schema check: return None when args are fine, or an error message string."
            ),
        },
        "prepareCode": {
            "type": "string",
            "description": (
                "Optional Python code for the body of prepare_arguments(args), run when the "
                "call starts, before validation: return the new args dict (or change args in "
                "place and return nothing)."
            ),
        },
        "parallel": {
            "type": "boolean",
            "default": False,
            "description": "Whether the tool may run in parallel with other tools.",
        },
        "overwrite": {
            "type": "boolean",
            "default": False,
            "description": "Replace an existing tool of the same name written earlier by writeTool.",
        },
    },
    "required": ["name", "label", "description", "inputSchema", "executeCode"],
}


def get_tool(store: ToolStore) -> AgentTool:
    """Return the writeTool tool bound to ``store`` (the loader passes the store it loads into)."""

    def execute_tool(
        tool_call_id: str, args: dict[str, Any], signal: AbortSignal | None, on_partial_result: Any
    ) -> AgentToolResult:
        return write_tool(store, args)

    return AgentTool(
        name="writeTool",
        label="Write Tool",
        description=(
            "Create a new tool from Python code when no existing tool can do the job. The tool is "
            "saved as a file and registered at once, so you can call it in your next step. Call "
            "listTools first to check the name is free."
        ),
        input_schema=INPUT_SCHEMA,
        execute=execute_tool,
        parallel_tool_execute=False,
    )
