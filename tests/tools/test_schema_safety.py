"""Tool input schemas from hostile sources (issue 18, items 1, 2 and 6).

1. No schema makes the agent fetch anything: a ``$ref`` that does not resolve within the schema
   is refused when the tool is built, naming the tool (checked against a loopback server that
   counts requests, and one that accepts connections and never answers).
2. ``pattern`` is matched with RE2, in linear time: a backtracking pattern cannot freeze the
   process (run in a child process, which the test can kill if it hangs), and a pattern RE2
   cannot run is refused from an untrusted source (an MCP server written with the SDK).
6. However large or wrong the arguments, the error text for the model stays within a few KB.
"""

from __future__ import annotations

import http.server
import json
import select
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from agent_helpers import WAIT, ScriptedLLM, call, reply
from paths import TESTS

from yiemagent import (
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    TextContent,
    ToolResultMessage,
    ToolStore,
    YiemAgent,
    validate_required_args,
    validate_tool_arguments,
)
from yiemagent.core._tools import compile_schema_validator
from yiemagent.errors import ToolArgumentError

HERE = TESTS
CHILD = HERE / "schema_pattern_child.py"
HOSTILE = "a" * 40 + "!"  # with ^(a+)+$, Python's re backtracks for hours
FEW_KB = 8 * 1024  # the most an argument error text may be


def tool(name: str, schema: dict[str, Any], **options: Any) -> AgentTool:
    """A tool that answers ``ran <name>``."""

    def execute(_id: str, _args: dict[str, Any], _signal: Any, _partial: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(f"ran {name}")])

    return AgentTool(name, name.title(), f"The {name} tool.", schema, execute, **options)


def city(ref: str, **extra: Any) -> dict[str, Any]:
    """An object schema whose ``city`` property is ``{"$ref": ref}``."""
    return {"type": "object", "properties": {"city": {"$ref": ref}}, "required": ["city"], **extra}


def argument_error(subject: AgentTool, args: Any) -> str:
    """The error text the model would get for calling ``subject`` with ``args``."""
    with pytest.raises(ToolArgumentError) as info:
        validate_tool_arguments(subject, AgentToolCall("c1", subject.name, args))
    return str(info.value)


def bounded(fn: Callable[[], Any]) -> tuple[bool, Any]:
    """Run ``fn`` on a daemon thread; ``(finished within WAIT, its value or exception)``."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WAIT)
    return (not thread.is_alive(), box[0] if box else None)


# -- loopback counterparts -----------------------------------------------------------------------


class CountingServer:
    """A loopback HTTP server that serves a schema at every path and counts the requests."""

    def __init__(self) -> None:
        self.requests = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with owner._lock:
                    owner.requests += 1
                body = json.dumps({"type": "string"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/schema+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> CountingServer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class SilentServer:
    """A loopback port whose connections are taken (the kernel completes them into the listen
    backlog) and never answered: nothing ever accepts or reads them."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)

    @property
    def url(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}"

    def was_connected(self) -> bool:
        """Whether any connection is waiting in the backlog (someone tried to fetch)."""
        return bool(select.select([self._sock], [], [], 0)[0])

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingServer]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")  # a fetch would reach this server
    with CountingServer() as server:
        yield server


@pytest.fixture
def silent(monkeypatch: pytest.MonkeyPatch) -> Iterator[SilentServer]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    server = SilentServer()
    yield server
    server.close()


def run_child(*args: str) -> dict[str, Any]:
    """Run ``schema_pattern_child.py`` with ``args``; its JSON answer. A child that hangs (as it
    does when a pattern backtracks) is killed and fails the test."""
    try:
        done = subprocess.run(
            [sys.executable, str(CHILD), *args], capture_output=True, text=True, timeout=6 * WAIT
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child process did not finish within {6 * WAIT:.0f} s: a pattern hung it")
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    answer["stderr"] = done.stderr
    return answer


# -- item 1: references resolve within the schema, and nowhere else --------------------------------


LOCAL_REFERENCES: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    # (schema, valid arguments, invalid arguments)
    (
        city("#/$defs/city", **{"$defs": {"city": {"type": "string", "minLength": 1}}}),
        {"city": "Oslo"},
        {"city": ""},
    ),
    (city("#name", **{"$defs": {"c": {"$anchor": "name", "type": "string"}}}), {"city": "Oslo"}, {"city": 1}),
    # An $id that looks remote names a part of this schema: resolved here, not fetched.
    (
        city(
            "city.json",
            **{
                "$id": "https://schemas.example/weather.json",
                "$defs": {"c": {"$id": "city.json", "type": "string"}},
            },
        ),
        {"city": "Oslo"},
        {"city": 1},
    ),
    (
        city(
            "#/definitions/c",
            **{
                "$schema": "http://json-schema.org/draft-07/schema#",
                "definitions": {"c": {"type": "string"}},
            },
        ),
        {"city": "Oslo"},
        {"city": 1},
    ),
    (
        {
            "$dynamicAnchor": "node",
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$dynamicRef": "#node"}},
            },
        },
        {"name": "a", "children": [{"name": "b"}]},
        {"name": "a", "children": [{"name": 2}]},
    ),
    (
        {"type": "object", "properties": {"next": {"$ref": "#"}, "n": {"type": "integer"}}},
        {"n": 1, "next": {"n": 2}},
        {"n": 1, "next": {"n": "two"}},
    ),
    # The metaschemas ship with jsonschema: referencing one fetches nothing either.
    (
        {
            "type": "object",
            "properties": {"schema": {"$ref": "https://json-schema.org/draft/2020-12/schema"}},
        },
        {"schema": {"type": "string"}},
        {"schema": {"type": 5}},
    ),
]


def test_references_resolve_within_the_schema_and_are_never_fetched(counting: CountingServer) -> None:
    for schema, good, bad in LOCAL_REFERENCES:
        local = tool("weather", schema)
        assert validate_tool_arguments(local, AgentToolCall("c", "weather", good)) == good
        assert "Validation failed" in argument_error(local, bad)

    remote = counting.url + "/city.json"
    refused = [
        (city(remote), "$ref", remote),
        (city("city.json", **{"$id": counting.url + "/weather.json"}), "$ref", "city.json"),
        ({"type": "object", "$dynamicRef": remote + "#meta"}, "$dynamicRef", remote + "#meta"),
        # reached only through a local reference
        (city("#/$defs/c", **{"$defs": {"c": {"$ref": remote}}}), "$ref", remote),
        # reached only through a reference into a place no subschema keyword names
        ({"$ref": "#/elsewhere", "elsewhere": {"$ref": remote}}, "$ref", remote),
        (city("#/$defs/missing"), "$ref", "#/$defs/missing"),
    ]
    for schema, keyword, ref in refused:
        with pytest.raises(ValueError) as info:
            tool("weather", schema)
        message = str(info.value)
        assert message.startswith(f'Tool "weather": input_schema has a {keyword} {ref!r}'), message
        assert "does not resolve within the schema" in message and "never fetched" in message
        with pytest.raises(ValueError, match="does not resolve within the schema"):
            validate_required_args({"city": "Oslo"}, schema)
    assert counting.requests == 0


def test_a_ref_to_a_server_that_never_answers_is_refused_at_once(silent: SilentServer) -> None:
    schema = city(silent.url + "/city.json")
    finished, outcome = bounded(lambda: tool("weather", schema))
    assert finished, "building the tool waited on the server"
    assert isinstance(outcome, ValueError) and 'Tool "weather"' in str(outcome), outcome
    assert silent.url in str(outcome)

    # The helper custom validators call, on every call, refuses it as quickly.
    finished, outcome = bounded(lambda: validate_required_args({"city": "Oslo"}, schema))
    assert finished, "checking arguments waited on the server"
    assert isinstance(outcome, ValueError), outcome
    assert not silent.was_connected()


def test_a_reference_that_stops_resolving_after_the_tool_was_built_is_an_error_result(
    counting: CountingServer,
) -> None:
    # Defence in depth: the build-time check cannot see a schema changed after it; the call
    # that meets the reference gets an error result, and still nothing is fetched.
    schema = city("#/$defs/c", **{"$defs": {"c": {"type": "string"}}})
    weather = tool("weather", schema)
    schema["$defs"]["c"] = {"$ref": counting.url + "/late.json"}
    llm = ScriptedLLM(call("weather", {"city": "Oslo"}), reply("done"))
    with YiemAgent(llm_call=llm, tools=[weather]) as agent:
        agent.prompt("go", timeout=WAIT)
        result = next(m for m in agent.messages if isinstance(m, ToolResultMessage))
    assert result.is_error
    assert "does not resolve" in result.content[0].text  # type: ignore[union-attr]
    assert counting.requests == 0


# -- item 2: patterns in linear time ---------------------------------------------------------------


def test_a_backtracking_pattern_cannot_freeze_a_run() -> None:
    answer = run_child("local")
    results = answer["results"]
    assert answer["fast_check"] is False  # the fast check uses RE2 too, and is not laxer
    assert results["c0"][0] and "does not match '^(a+)+$'" in results["c0"][1]
    assert results["c1"] == [False, 'ran word with {"word": "aaaa"}']
    # patternProperties: the hostile key matches nothing; "aaa" matches and is checked
    assert results["c2"][0] and "args.aaa: 'x' is not of type 'integer'" in results["c2"][1]
    # additionalProperties asks whether each name matches a patternProperties pattern
    assert results["c3"][0] and "does not match any of the regexes" in results["c3"][1]
    # a subschema with its own $schema still uses RE2
    assert results["c4"][0] and "does not match '^(a+)+$'" in results["c4"][1]


def test_patterns_re2_cannot_run_are_refused_from_untrusted_sources_only() -> None:
    lookahead = "^(?=.*[0-9]).+$"
    cases = [
        {"type": "object", "properties": {"code": {"type": "string", "pattern": lookahead}}},
        {"type": "object", "patternProperties": {"(a)\\1": {}}},
        {
            "type": "object",
            "properties": {"code": {"$ref": "#/$defs/c"}},
            "$defs": {"c": {"$schema": "http://json-schema.org/draft-07/schema#", "pattern": lookahead}},
        },
    ]
    for schema in cases:
        with pytest.raises(ValueError) as info:
            tool("served", schema, untrusted_schema=True)
        message = str(info.value)
        assert message.startswith('Tool "served": input_schema has a pattern '), message
        assert "cannot be matched in linear time: RE2 refuses it" in message
        # Your own tool keeps Python's re for it.
        tool("mine", schema)
    mine = tool("mine", cases[0])
    assert validate_tool_arguments(mine, AgentToolCall("c", "mine", {"code": "ab1"})) == {"code": "ab1"}
    assert "does not match" in argument_error(mine, {"code": "abc"})

    with pytest.raises(ValueError, match="unevaluatedProperties together with patternProperties"):
        tool(
            "served",
            {"patternProperties": {"^x": {}}, "properties": {"a": {"unevaluatedProperties": False}}},
            untrusted_schema=True,
        )


SUBSCHEMA_PLACES: list[tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = (
    [
        (keyword, lambda sub, k=keyword: {k: sub})
        for keyword in (
            "additionalProperties",
            "contains",
            "else",
            "if",
            "items",
            "not",
            "propertyNames",
            "then",
            "unevaluatedItems",
            "unevaluatedProperties",
        )
    ]
    + [
        (keyword, lambda sub, k=keyword: {k: [{}, sub]})
        for keyword in ("allOf", "anyOf", "oneOf", "prefixItems")
    ]
    + [
        (keyword, lambda sub, k=keyword: {k: {"x": sub}})
        for keyword in ("$defs", "dependentSchemas", "patternProperties", "properties")
    ]
    + [
        (
            "draft-07 " + keyword,
            lambda sub, k=keyword, m=make: {
                "$schema": "http://json-schema.org/draft-07/schema#",
                **m(k, sub),
            },
        )
        for keyword, make in (
            ("definitions", lambda k, sub: {k: {"x": sub}}),
            ("dependencies", lambda k, sub: {k: {"x": sub}}),
            ("additionalItems", lambda k, sub: {k: sub}),
            ("items", lambda k, sub: {k: [sub]}),
        )
    ]
)


@pytest.mark.parametrize(("place", "wrap"), SUBSCHEMA_PLACES, ids=[p for p, _ in SUBSCHEMA_PLACES])
def test_every_place_a_subschema_can_be_is_checked(place: str, wrap: Callable[..., dict[str, Any]]) -> None:
    with pytest.raises(ValueError, match="cannot be matched in linear time"):
        tool("served", wrap({"pattern": "(?=x)"}), untrusted_schema=True)


def test_a_text_too_long_for_its_pattern_is_a_violation_not_a_long_match() -> None:
    from yiemagent.core._schema_patterns import linear_pattern

    pattern = "^[a-z]+$"
    limit = linear_pattern(pattern).max_bytes
    word = tool("word", {"type": "object", "properties": {"w": {"type": "string", "pattern": pattern}}})
    assert validate_tool_arguments(word, AgentToolCall("c", "word", {"w": "a" * limit}))
    assert word.fast_check is not None and not word.fast_check({"w": "a" * (limit + 1)})
    message = argument_error(word, {"w": "a" * (limit + 1)})
    assert f"is too long to check against the pattern '^[a-z]+$' (more than the {limit} bytes" in message


def test_ecma_unicode_escapes_work_with_re2() -> None:
    schema = {
        "type": "object",
        "properties": {
            "word": {"type": "string", "pattern": "^\\u00e9t\\u00e9$"},
            "face": {"type": "string", "pattern": "^\\uD83D\\uDE01$"},  # a surrogate pair: one character
            "slash": {"type": "string", "pattern": "^\\\\u0041$"},
        },
    }  # an escaped backslash, then u0041
    served = tool("served", schema, untrusted_schema=True)
    args = {"word": "été", "face": "😁", "slash": "\\u0041"}
    assert validate_tool_arguments(served, AgentToolCall("c", "served", args)) == args
    assert "does not match" in argument_error(served, {"word": "ete"})


# -- items 1 and 2 through a real MCP server -------------------------------------------------------


@pytest.mark.needs("mcp")
def test_an_mcp_server_with_hostile_schemas_is_refused_naming_the_tools(counting: CountingServer) -> None:
    server = [sys.executable, str(HERE / "mcp_schema_server.py"), counting.url + "/city.json"]
    from yiemagent.tools.mcp import McpOptions
    from yiemagent.tools.mcp._connection import McpToolError, load_mcp_tools

    with ToolStore() as store:
        with pytest.raises(McpToolError) as info:
            load_mcp_tools(store, server, options=McpOptions(connect_timeout_s=WAIT))
        assert store.tools == {}  # a strict load leaves nothing registered
    message = str(info.value)
    assert "2 tool(s) could not be registered" in message
    assert '"remote_ref": Tool "remote_ref": input_schema has a $ref' in message
    assert '"lookahead": Tool "lookahead": input_schema has a pattern' in message
    assert counting.requests == 0


@pytest.mark.needs("mcp")
def test_an_mcp_server_with_hostile_schemas_loads_the_rest_when_not_strict(silent: SilentServer) -> None:
    answer = run_child("mcp", silent.url + "/city.json")
    assert answer["tool_names"] == ["backtrack", "echo", "structured"]
    warned = answer["stderr"]
    assert '"remote_ref": Tool "remote_ref"' in warned and '"lookahead": Tool "lookahead"' in warned
    results = answer["results"]
    assert results["c0"][0] and "does not match '^(a+)+$'" in results["c0"][1]
    assert results["c1"] == [False, 'called backtrack with {"word": "aaaa"}']
    assert results["c2"] == [False, 'called echo with {"text": "hi"}']
    # The output schema is checked too, and with RE2: the SDK's own check, with Python's re,
    # would have frozen the process on this result.
    assert results["c3"][0] and "Invalid structured content returned by tool structured" in results["c3"][1]
    assert "does not match '^(a+)+$'" in results["c3"][1]
    assert results["c4"][0] is False and 'called structured with {"word": "aaaa"}' in results["c4"][1]
    assert not silent.was_connected()


# -- item 6: error texts stay small ----------------------------------------------------------------


SIZES: dict[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "xs": {"type": "array", "items": {"type": "integer"}}},
    "additionalProperties": False,
}


def test_a_10_mb_bad_value_makes_an_error_text_of_a_few_kb() -> None:
    sizes = tool("sizes", SIZES)
    llm = ScriptedLLM(call("sizes", {"n": "x" * 10_000_000}), reply("done"))
    with YiemAgent(llm_call=llm, tools=[sizes]) as agent:
        agent.prompt("go", timeout=3 * WAIT)
        result = next(m for m in agent.messages if isinstance(m, ToolResultMessage))
    message = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error and len(message) <= FEW_KB, len(message)
    violation = message.splitlines()[1]
    assert violation.startswith("  - args.n: 'xxxxx") and violation.endswith("is not of type 'integer'")
    assert "(9999952 more characters not shown)" in violation


def test_ten_thousand_violations_make_an_error_text_of_a_few_kb() -> None:
    message = argument_error(tool("sizes", SIZES), {"xs": ["a"] * 10_000})
    assert len(message) <= FEW_KB, len(message)
    lines = message.split("\n\nReceived arguments:\n")[0].splitlines()
    assert lines[1:] == [f"  - args.xs[{i}]: 'a' is not of type 'integer'" for i in range(10)] + [
        "  ... and more than 990 more violations (not shown)"  # the first thousand are counted
    ]


def test_huge_names_and_custom_problems_are_cut_too() -> None:
    message = argument_error(tool("sizes", SIZES), {"k" * 1_000_000: 1})
    assert len(message) <= FEW_KB, len(message)
    assert "characters left out" in message and message.splitlines()[1].endswith("' was unexpected)")

    custom = tool("custom", SIZES, validate_required_args=lambda args: "bad: " + "y" * 1_000_000)
    message = argument_error(custom, {"n": 1})
    assert len(message) <= FEW_KB and "more characters not shown" in message


def test_the_validator_is_compiled_once_per_kind_of_schema() -> None:
    # The safe classes are made once and reused (a new class per tool would leak).
    first = compile_schema_validator(None, {"type": "string"}, untrusted=True)
    second = compile_schema_validator(None, {"type": "integer"}, untrusted=True)
    mine = compile_schema_validator(None, {"type": "integer"})
    assert type(first) is type(second) and type(mine) is not type(first)
