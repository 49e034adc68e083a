"""Fixture tool files and writeTool's code placeholders, made real in Python.

A scenario's ``tool_files`` describe tool files in the behaviour vocabulary; ``materialise``
writes each as a real Python tool file (the tool-file contract of spec section 17, as
``load_tools`` reads it) into a folder, so the scenario loads a real folder. A port writes the
same files in its own language: the vocabulary, not this code, is the contract
(parity/VOCABULARY-NEW.md).

writeTool's code arguments are language-specific, so a scenario's replies carry placeholders
``{"$code": behaviour}`` instead; ``CodePlaceholders`` turns each into Python code before the
reply is delivered, and remembers which code stands for which placeholder so the normaliser can
turn the code back into the placeholder (traces stay language-neutral).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["CODE_KEY", "CodePlaceholders", "materialise", "render_tool_file", "write_tool_source"]

CODE_KEY = "$code"

# What each kind of bad file is made of: every one defines a proper execute_tool, so only the
# named defect keeps it from loading.
_BAD_FILES = {
    "syntax_error": "def get_tool(:\n    pass\n",
    "no_get_tool": "def execute_tool(tool_call_id, args, signal, on_partial_result):\n    return 'never'\n",
    "get_tool_raises": "def get_tool():\n    raise RuntimeError('this tool file cannot make its tool')\n",
    "not_a_tool": "def get_tool():\n    return {'name': 'not_a_tool'}\n",
}


def _literal(value: Any) -> str:
    """A JSON value as a Python literal (``repr`` of the parsed value is one)."""
    return repr(json.loads(json.dumps(value)))


def render_tool_file(entry: Mapping[str, Any]) -> str:
    """The Python source of one fixture tool file (a ``tool_files`` entry)."""
    if "bad" in entry:
        return f"# parity fixture {entry['file']}: {entry['bad']}\n" + _BAD_FILES[entry["bad"]]
    tool = entry["tool"]
    outcome = tool["outcome"]
    lines = [
        f"# parity fixture {entry['file']}: a tool file made from the behaviour vocabulary",
        "import json",
        "",
        f"NAME = {tool['name']!r}",
        f"LABEL = {tool.get('label', tool['name'])!r}",
        f"DESCRIPTION = {tool.get('description', '')!r}",
        f"INPUT_SCHEMA = {_literal(tool.get('input_schema', {'type': 'object'}))}",
        f"PARALLEL = {bool(tool.get('parallel', False))!r}",
        f"TEXT = {outcome.get('text')!r}",
        f"DETAILS = {_literal(outcome.get('details', {}))}",
        f"TERMINATE = {bool(outcome.get('terminate', False))!r}",
        "",
        "",
        "def result_text(args):  # the same helper name in every fixture file, each its own",
    ]
    if outcome.get("echo"):
        lines.append("    return json.dumps(args, sort_keys=True, separators=(',', ':'), ensure_ascii=False)")
    else:
        lines.append("    return TEXT")
    lines += ["", "", "def execute_tool(tool_call_id, args, signal, on_partial_result):"]
    if "fail" in outcome:
        lines.append(f"    raise RuntimeError({outcome['fail']!r})")
    elif outcome.get("invalid_result"):
        lines.append("    return 'not a tool result'")
    else:
        lines.append(
            "    return AgentToolResult([TextContent(result_text(args))], dict(DETAILS), terminate=TERMINATE)"
        )
    hooks = ""
    prepare = tool.get("prepare")
    if prepare is not None:
        lines += ["", "", "def prepare_arguments(args):"]
        if "fail" in prepare:
            lines.append(f"    raise RuntimeError({prepare['fail']!r})")
        else:
            lines.append(f"    return {{**{_literal(prepare['defaults'])}, **args}}")
        hooks += "        prepare_arguments=prepare_arguments,\n"
    validate = tool.get("validate")
    if validate is not None:
        lines += ["", "", "def validate_required_args(args):", f"    return {validate.get('reject')!r}"]
        hooks += "        validate_required_args=validate_required_args,\n"
    lines += [
        "",
        "",
        "def get_tool():",
        "    return AgentTool(",
        "        name=NAME,",
        "        label=LABEL,",
        "        description=DESCRIPTION,",
        "        input_schema=INPUT_SCHEMA,",
        "        execute=execute_tool,",
        hooks + "        parallel_tool_execute=PARALLEL,",
        "    )",
        "",
    ]
    return "\n".join(lines)


def write_tool_source() -> Path:
    """The example folder's ``writeTool.py`` (the one the installed package ships)."""
    from yiemagent.tools._examples import example_tools_folder

    return Path(example_tools_folder()) / "writeTool.py"


def materialise(entries: Sequence[Mapping[str, Any]], folder: Path, write_tool: bool = False) -> None:
    """Write every ``tool_files`` entry as ``<file>.py`` into ``folder`` (and writeTool's own
    file when ``write_tool``)."""
    for entry in entries:
        (folder / f"{entry['file']}.py").write_text(render_tool_file(entry), encoding="utf-8")
    if write_tool:
        shutil.copyfile(write_tool_source(), folder / "writeTool.py")


def _code(behaviour: Mapping[str, Any]) -> str:
    """Python code for one placeholder: a function body, which field it goes in decides which
    function (execute, validate or prepare) it is the body of."""
    if behaviour.get("syntax_error"):
        return "return ("
    if behaviour.get("echo"):
        return "return json.dumps(args, sort_keys=True, separators=(',', ':'), ensure_ascii=False)"
    if "text" in behaviour:
        return f"return {behaviour['text']!r}"
    if "fail" in behaviour:
        return f"raise RuntimeError({behaviour['fail']!r})"
    if "reject" in behaviour:
        return f"return {behaviour['reject']!r}"
    if behaviour.get("accept"):
        return "return None"
    return f"return {{**{_literal(behaviour['defaults'])}, **args}}"


class CodePlaceholders:
    """Turns ``{"$code": behaviour}`` argument values into code, and code back into them."""

    def __init__(self) -> None:
        self.placeholders: dict[str, dict[str, Any]] = {}

    def expand_arguments(self, raw: str) -> str:
        """A call's JSON arguments with every top-level placeholder value replaced by code; any
        other text (malformed on purpose, say) is returned unchanged."""
        try:
            args = json.loads(raw)
        except ValueError:
            return raw
        if not isinstance(args, dict) or not any(_is_placeholder(v) for v in args.values()):
            return raw
        out = {}
        for key, value in args.items():
            if _is_placeholder(value):
                code = _code(value[CODE_KEY])
                self.placeholders[code] = value
                value = code
            out[key] = value
        return json.dumps(out, ensure_ascii=False)

    def restore(self, args: Any) -> Any:
        """``args`` (an arguments object) with code this object made turned back into its
        placeholder; anything else unchanged."""
        if not isinstance(args, Mapping) or not self.placeholders:
            return args
        return {k: self.placeholders.get(v, v) if isinstance(v, str) else v for k, v in args.items()}


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {CODE_KEY} and isinstance(value[CODE_KEY], dict)
