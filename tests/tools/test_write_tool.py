"""tools/writeTool.py: the self-tooling workflow end to end, and every refusal (spec section 15)."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from yiemagent.agent._agent import YiemAgent
from yiemagent.core._content import AgentToolCall, TextContent
from yiemagent.core._messages import AssistantMessage, ToolResultMessage
from yiemagent.core._pipeline import execute_tool_calls
from yiemagent.core._tools import AgentContext, AgentLoopConfig, AgentTool, AgentToolCallBatch
from yiemagent.tools._store import ToolStore, get_tools, load_tools, register_tool

REPO_TOOLS = ROOT / "tools"

ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}
ADD_ARGS: dict[str, Any] = {
    "name": "addNumbers",
    "label": "Add Numbers",
    "description": "Add two numbers and return their sum.",
    "inputSchema": ADD_SCHEMA,
    "executeCode": "total = args['a'] + args['b']\nreturn {'sum': total}",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("writeTool.py", "getTime.py"):
        shutil.copy(REPO_TOOLS / name, tools / name)
    return tools


@pytest.fixture
def store(folder: Path) -> ToolStore:
    store = ToolStore("agent")
    load_tools(store, folder)
    return store


def run(context: AgentContext, *calls: AgentToolCall) -> AgentToolCallBatch:
    """One turn: execute the calls of an assistant message with the context's tools."""
    message = AssistantMessage(content=list(calls))
    return execute_tool_calls(context, message, list(calls), AgentLoopConfig(), None, None)


def adopt(context: AgentContext, store: ToolStore, message: ToolResultMessage) -> None:
    """What the runtime does after a batch: copy newly added tools from the store."""
    for name in message.added_tool_names:
        context.tools[name] = store.tools[name]


def write(store: ToolStore, **changes: Any) -> ToolResultMessage:
    """Call writeTool through the pipeline with ADD_ARGS plus ``changes`` (``None`` removes)."""
    args = {**ADD_ARGS, **changes}
    args = {k: v for k, v in args.items() if v is not None}
    context = AgentContext("", [], dict(store.tools))
    return run(context, AgentToolCall("call-w", "writeTool", args)).messages[0]


def use(store: ToolStore, name: str, args: dict[str, Any]) -> ToolResultMessage:
    context = AgentContext("", [], dict(store.tools))
    return run(context, AgentToolCall("call-u", name, args)).messages[0]


def text(message: ToolResultMessage) -> str:
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))


def files(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


# -- the workflow -------------------------------------------------------------------------------


def test_a_written_tool_is_called_by_name_in_the_next_turn(store: ToolStore, folder: Path) -> None:
    context = AgentContext("You can write tools.", [], dict(store.tools))
    first = run(context, AgentToolCall("call-1", "writeTool", ADD_ARGS)).messages[0]
    assert not first.is_error, text(first)
    assert first.added_tool_names == ["addNumbers"]
    assert first.details["path"] == str(folder.resolve() / "addNumbers.py")
    assert (folder / "addNumbers.py").is_file()
    assert isinstance(store.tools["addNumbers"], AgentTool)
    assert "addNumbers" not in context.tools  # the runtime adopts it after the batch

    adopt(context, store, first)
    second = run(context, AgentToolCall("call-2", "addNumbers", {"a": 2, "b": 3.5})).messages[0]
    assert not second.is_error, text(second)
    assert text(second) == '{"sum": 5.5}'
    assert second.details == {"result": {"sum": 5.5}}


def test_through_the_agent_runtime(store: ToolStore) -> None:
    requests: list[dict[str, Any]] = []

    def llm_call(request: dict[str, Any]) -> AssistantMessage:
        requests.append(request)
        if len(requests) == 1:
            return AssistantMessage(content=[AgentToolCall("call-1", "writeTool", ADD_ARGS)])
        if len(requests) == 2:
            return AssistantMessage(content=[AgentToolCall("call-2", "addNumbers", {"a": 2, "b": 3})])
        content = request["messages"][-1]["content"]
        said = content if isinstance(content, str) else "".join(p["text"] for p in content)
        return AssistantMessage(content=[TextContent(f"The tool said {said}")])

    agent = YiemAgent(llm_call=llm_call, tools=get_tools(store), tool_store=store)
    try:
        final = agent.prompt("Add 2 and 3 with a new tool.", timeout=10)
    finally:
        agent.shutdown()
    assert "".join(b.text for b in final.content if isinstance(b, TextContent)) == 'The tool said {"sum": 5}'
    offered = [t["function"]["name"] for t in requests[1].get("tools", [])]
    assert "addNumbers" in offered


def test_the_written_tool_validates_its_arguments(store: ToolStore) -> None:
    write(store)
    message = use(store, "addNumbers", {"a": "two"})
    assert message.is_error
    assert "args.a: 'two' is not of type 'number'" in text(message)
    assert "'b' is a required property" in text(message)


def test_validate_and_prepare_code(store: ToolStore) -> None:
    message = write(
        store,
        name="divide",
        executeCode="return str(args['a'] / args['b'])",
        prepareCode="return {k: float(v) if isinstance(v, str) else v for k, v in args.items()}",
        validateCode="if args['b'] == 0:\n    return 'b must not be zero'",
    )
    assert not message.is_error, text(message)
    assert text(use(store, "divide", {"a": "9", "b": "2"})) == "4.5"
    refused = use(store, "divide", {"a": 1, "b": 0})
    assert refused.is_error and "b must not be zero" in text(refused)
    schema_checked = use(store, "divide", {"a": 1, "b": True})
    assert schema_checked.is_error and "is not of type 'number'" in text(schema_checked)


def test_code_can_return_a_string_or_a_result(store: ToolStore) -> None:
    write(
        store,
        name="hello",
        executeCode="return 'hi ' + args.get('who', 'there')",
        inputSchema={"type": "object", "properties": {"who": {"type": "string"}}},
    )
    assert text(use(store, "hello", {"who": "Ada"})) == "hi Ada"
    write(
        store,
        name="rich",
        inputSchema={"type": "object"},
        executeCode="return AgentToolResult([TextContent('rich text')], {'n': 1})",
    )
    rich = use(store, "rich", {})
    assert (text(rich), rich.details) == ("rich text", {"n": 1})


def test_code_that_returns_nothing_or_raises_gives_error_results(store: ToolStore) -> None:
    write(store, name="silent", inputSchema={"type": "object"}, executeCode="x = 1")
    silent = use(store, "silent", {})
    assert silent.is_error and "returned nothing" in text(silent)
    write(store, name="angry", inputSchema={"type": "object"}, executeCode="raise KeyError('nope')")
    angry = use(store, "angry", {})
    assert angry.is_error and "KeyError" in text(angry)


def test_the_parallel_flag(store: ToolStore) -> None:
    write(store, parallel=True)
    assert store.tools["addNumbers"].parallel_tool_execute is True


def test_list_tools_shows_the_new_tool(store: ToolStore) -> None:
    write(store)
    listing = text(use(store, "listTools", {}))
    assert "- addNumbers: Add Numbers — Add two numbers and return their sum." in listing


def test_the_file_persists_and_a_reload_keeps_the_same_tool(store: ToolStore, folder: Path) -> None:
    write(store)
    tool = store.tools["addNumbers"]
    assert load_tools(store, folder)["addNumbers"] is tool
    fresh = ToolStore("restarted")
    assert text(use_in(fresh, folder, "addNumbers", {"a": 1, "b": 1})) == '{"sum": 2}'


def use_in(fresh: ToolStore, folder: Path, name: str, args: dict[str, Any]) -> ToolResultMessage:
    load_tools(fresh, folder)
    return use(fresh, name, args)


def test_overwrite_replaces_a_written_tool(store: ToolStore, folder: Path) -> None:
    write(store)
    order = list(store.tools)
    message = write(store, executeCode="return {'sum': args['a'] + args['b'] + 100}", overwrite=True)
    assert not message.is_error, text(message)
    assert text(message).startswith('Replaced tool "addNumbers"')
    assert message.added_tool_names == ["addNumbers"]
    assert text(use(store, "addNumbers", {"a": 1, "b": 2})) == '{"sum": 103}'
    assert list(store.tools) == order
    assert files(folder).count("addNumbers.py") == 1


def test_multi_line_strings_keep_their_content(store: ToolStore) -> None:
    code = 'poem = """first\n    indented\nlast"""\nreturn poem'
    message = write(store, name="poem", inputSchema={"type": "object"}, executeCode=code)
    assert not message.is_error, text(message)
    assert text(use(store, "poem", {})) == "first\n    indented\nlast"


def test_code_given_all_indented_is_accepted(store: ToolStore) -> None:
    message = write(store, executeCode="    total = args['a'] + args['b']\n    return total")
    assert not message.is_error, text(message)
    assert text(use(store, "addNumbers", {"a": 1, "b": 2})) == "3"


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_022")
def test_a_new_file_gets_the_umask_mode_and_a_replacement_keeps_the_old_mode(
    store: ToolStore, folder: Path
) -> None:
    write(store)
    assert mode_of(folder / "addNumbers.py") == 0o644  # 0o666 less the umask, as open() gives
    os.chmod(folder / "addNumbers.py", 0o640)
    message = write(store, executeCode="return 'v2'", overwrite=True)
    assert not message.is_error, text(message)
    assert mode_of(folder / "addNumbers.py") == 0o640


# -- refusals -----------------------------------------------------------------------------------


def assert_refused(store: ToolStore, folder: Path, fragment: str, **changes: Any) -> ToolResultMessage:
    """writeTool with ``changes`` is refused with ``fragment``; nothing is written or registered."""
    before_files, before_tools = files(folder), dict(store.tools)
    message = write(store, **changes)
    assert message.is_error, text(message)
    assert fragment in text(message)
    assert message.added_tool_names == []
    assert files(folder) == before_files
    assert store.tools == before_tools
    return message


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("1abc", "must be a Python identifier"),
        ("a-b", "must be a Python identifier"),
        ("../x", "paths are not allowed"),
        ("a/b", "paths are not allowed"),
        ("/tmp/evil", "paths are not allowed"),
        ("naïve", "must be a Python identifier"),
        ("", "must be a Python identifier"),
        ("class", "is a Python keyword"),
        ("listTools", "reserved"),
        ("writeTool", "reserved"),
        ("_hidden", "starts with a letter"),
        ("toolregistry", 'contains "registry"'),
        (42, "is not of type 'string'"),
    ],
)
def test_bad_names_are_refused(store: ToolStore, folder: Path, name: Any, fragment: str) -> None:
    assert_refused(store, folder, fragment, name=name)
    assert not (folder.parent / "x.py").exists()
    assert not (folder.parent / "evil.py").exists()


def test_an_existing_tool_name_is_refused(store: ToolStore, folder: Path) -> None:
    message = assert_refused(store, folder, 'A tool named "getTime" already exists', name="getTime")
    assert "set overwrite to true" in text(message)


def test_an_existing_written_tool_is_refused_without_overwrite(store: ToolStore, folder: Path) -> None:
    write(store)
    original = (folder / "addNumbers.py").read_text()
    assert_refused(store, folder, 'A tool named "addNumbers" already exists', executeCode="return 'other'")
    assert (folder / "addNumbers.py").read_text() == original


def test_a_hand_registered_name_is_refused(store: ToolStore, folder: Path) -> None:
    register_tool(store, AgentTool("manual", "Manual", "d", {"type": "object"}, lambda *a: None))
    assert_refused(store, folder, 'A tool named "manual" already exists', name="manual")
    assert_refused(
        store, folder, "registered by the program, not written by writeTool", name="manual", overwrite=True
    )


def test_written_files_carry_the_marker(store: ToolStore, folder: Path) -> None:
    write(store)
    marker = writer_module(store).MARKER
    assert (folder / "addNumbers.py").read_text().splitlines()[0] == marker


def test_overwrite_never_replaces_a_hand_written_tool_file(store: ToolStore, folder: Path) -> None:
    original = (folder / "getTime.py").read_bytes()
    assert_refused(store, folder, "getTime.py was not written by writeTool", name="getTime", overwrite=True)
    assert (folder / "getTime.py").read_bytes() == original


def test_overwrite_never_replaces_an_unloaded_hand_written_file(store: ToolStore, folder: Path) -> None:
    (folder / "addNumbers.py").write_text("# my own work in progress\n")
    assert_refused(store, folder, "addNumbers.py was not written by writeTool", overwrite=True)
    assert (folder / "addNumbers.py").read_text() == "# my own work in progress\n"


def test_a_tool_defined_by_another_file_cannot_be_overwritten(store: ToolStore, folder: Path) -> None:
    (folder / "helpers.py").write_text(
        "def get_tool():\n    return AgentTool('fancy', 'Fancy', 'd', {'type': 'object'}, lambda *a: None)\n"
    )
    load_tools(store, folder)
    assert_refused(store, folder, "is defined by helpers.py", name="fancy", overwrite=True)


def test_a_name_differing_only_in_case_from_a_file_is_refused(store: ToolStore, folder: Path) -> None:
    (folder / "AddNumbers.py").write_text("# not loaded yet\n")
    assert_refused(store, folder, "differs from 'addNumbers' only in letter case", overwrite=True)


def test_a_symlink_out_of_the_folder_is_never_written_through(
    store: ToolStore, folder: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text("SECRET = 1\n")
    (folder / "escape.py").symlink_to(outside)
    assert_refused(
        store, folder, "does not give a file inside the tool folder", name="escape", overwrite=True
    )
    assert outside.read_text() == "SECRET = 1\n"
    assert (folder / "escape.py").is_symlink()


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ("not a schema", "is not of type 'object'"),
        ({"type": "array", "items": {"type": "string"}}, 'set "type": "object"'),
        ({"type": "object", "properties": {"a": {"type": "nonsense"}}}, "not a valid JSON Schema"),
        ({"type": "object", "properties": "a, b"}, "not a valid JSON Schema"),
        ({"type": "object", "required": "a"}, "not a valid JSON Schema"),
        ({"type": "object", "maximum": float("nan")}, "is nan, which is not a JSON number"),
        # A model's pattern is as untrusted as an MCP server's: only ones RE2 runs in linear time.
        (
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?=a)(a+)+$"}}},
            "cannot be matched in linear time: RE2 refuses it",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a)\\1$"}}},
            "cannot be matched in linear time",
        ),
    ],
)
def test_bad_schemas_are_refused(store: ToolStore, folder: Path, schema: Any, fragment: str) -> None:
    assert_refused(store, folder, fragment, inputSchema=schema)


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"executeCode": "return ("}, '"executeCode" does not compile: line 1'),
        ({"executeCode": "x = 1\ny = (\nreturn x"}, '"executeCode" does not compile: line'),
        ({"executeCode": "result = await fetch()\nreturn result"}, "'await' outside async function"),
        ({"executeCode": "   "}, '"executeCode" must be a non-empty string'),
        ({"executeCode": None}, "'executeCode' is a required property"),
        ({"validateCode": "if args['b'] == 0\n    return 'zero'"}, '"validateCode" does not compile: line 1'),
        ({"prepareCode": "return {"}, '"prepareCode" does not compile'),
        ({"label": "  "}, '"label" must be a non-empty string'),
        ({"description": None}, "'description' is a required property"),
    ],
)
def test_bad_code_and_fields_are_refused(
    store: ToolStore, folder: Path, changes: dict[str, Any], fragment: str
) -> None:
    assert_refused(store, folder, fragment, **changes)


def test_the_refusal_says_what_the_code_must_be(store: ToolStore, folder: Path) -> None:
    message = assert_refused(store, folder, "does not compile", executeCode="def (")
    assert "body of execute_tool(tool_call_id, args, signal, on_partial_result)" in text(message)


def test_non_boolean_flags_are_refused(store: ToolStore, folder: Path) -> None:
    direct = store.tools["writeTool"]
    with pytest.raises(ValueError, match='"overwrite" must be true or false'):
        direct.execute("call-1", {**ADD_ARGS, "overwrite": "yes"}, None, lambda _p: None)
    assert "addNumbers.py" not in files(folder)


def writer_module(store: ToolStore) -> types.ModuleType:
    return sys.modules[store.tools["writeTool"].execute.__module__]


def test_a_generated_file_that_fails_to_load_is_refused_and_removed(
    store: ToolStore, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only reachable defensively: the generated file runs none of the model's code at import (it
    # becomes function bodies; the rest are literals and yiemagent imports), and code that does
    # not compile is refused earlier. So a broken generator is simulated here.
    monkeypatch.setattr(
        writer_module(store),
        "render_tool_file",
        lambda spec: "X = 1\nraise RuntimeError('broken at import')\n",
    )
    message = assert_refused(store, folder, "The generated tool file does not load")
    assert "RuntimeError at line 2" in text(message) and "broken at import" in text(message)


def test_a_generated_file_giving_another_name_is_refused(
    store: ToolStore, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = (
        "def get_tool():\n    return AgentTool('other', 'Other', 'd', {'type': 'object'}, lambda *a: None)\n"
    )
    monkeypatch.setattr(writer_module(store), "render_tool_file", lambda spec: source)
    assert_refused(store, folder, "gives a tool named 'other', not 'addNumbers'")


def test_a_store_without_a_folder_is_refused(folder: Path) -> None:
    unloaded = ToolStore("no folder")
    module = types.ModuleType("writer_under_test")
    source = folder / "writeTool.py"
    exec(compile(source.read_text(), str(source), "exec"), module.__dict__)
    tool = module.get_tool(unloaded)
    with pytest.raises(ValueError, match="has no folder to write to"):
        tool.execute("call-1", dict(ADD_ARGS), None, lambda _p: None)


def test_a_written_tool_is_marked_as_having_an_untrusted_schema(store: ToolStore) -> None:
    """So a pattern in it that RE2 cannot run is refused even if the file is loaded elsewhere."""
    assert not write(store).is_error
    assert store.tools[ADD_ARGS["name"]].untrusted_schema is True
