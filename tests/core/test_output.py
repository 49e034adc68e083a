"""A run that ends in data: the output tool, the native mode's text, refusals that go back to the
model with their violations and paths, retries counted and spent, a validate_output hook, and
a tool that gives the output itself so no further LLM call is made. Driven through ``run_loop``
with a scripted model that records every request."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from yiemagent import (
    AgentState,
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    LlmRequest,
    OutputRejected,
    RunConfig,
    TextContent,
    ToolResultMessage,
    UserMessage,
    run_loop,
)
from yiemagent.core._output import OutputSpec, _unfenced

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "role": {"type": "string", "enum": ["admin", "user"]},
    },
    "required": ["name", "age", "role"],
    "additionalProperties": False,
}
GOOD = {"name": "Ada", "age": 36, "role": "admin"}


class Script:
    """An ``llm_call`` that answers from a list and keeps every request it was given."""

    def __init__(self, replies: Sequence[AssistantMessage]) -> None:
        self.replies = list(replies)
        self.requests: list[LlmRequest] = []

    def __call__(self, request: LlmRequest) -> AssistantMessage:
        self.requests.append(request)
        return self.replies[len(self.requests) - 1]


def answer(args: Any, call_id: str = "c1", name: str = "final_answer") -> AssistantMessage:
    return AssistantMessage([AgentToolCall(call_id, name, args)], stop_reason="toolUse")


def text(value: str) -> AssistantMessage:
    return AssistantMessage([TextContent(value)])


def run(
    replies: Sequence[AssistantMessage], spec: OutputSpec, tools: Sequence[AgentTool] = ()
) -> tuple[AssistantMessage, AgentState, Script]:
    script = Script(replies)
    state = AgentState(tools=list(tools))
    response = run_loop([UserMessage("Who is Ada?")], state, RunConfig(llm_call=script, output=spec))
    return response, state, script


def lookup_tool(result: AgentToolResult | None = None) -> AgentTool:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    given = result if result is not None else AgentToolResult("Ada Lovelace, 36, admin")
    return AgentTool("lookup", "Lookup", "Look a person up.", schema, lambda *_: given)


def texts(message: Any) -> str:
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))


# -- the tool mode ------------------------------------------------------------------------------


def test_a_valid_answer_through_the_output_tool_is_the_runs_output() -> None:
    response, state, script = run([answer(GOOD)], OutputSpec(schema=PERSON))
    assert response.stop_reason == "stop" and response.error_message is None
    assert response.output == GOOD
    assert texts(response) == '{"name": "Ada", "age": 36, "role": "admin"}'
    assert response.to_dict()["output"] == GOOD
    # The tool is offered with the output's schema, and its call gets a result in the history.
    tool = script.requests[0].tools["final_answer"]
    assert tool.input_schema == PERSON
    assert [type(m) for m in state.messages] == [UserMessage, AssistantMessage, ToolResultMessage]
    last = state.messages[-1]
    assert isinstance(last, ToolResultMessage) and not last.is_error
    assert texts(last) == "Final answer received."
    assert len(script.requests) == 1


def test_an_invalid_answer_goes_back_with_every_violation_and_its_path() -> None:
    bad = {"name": "Ada", "age": -1, "role": "root", "extra": 1}
    response, _state, script = run([answer(bad), answer(GOOD, "c2")], OutputSpec(schema=PERSON))
    assert response.output == GOOD
    assert len(script.requests) == 2
    sent = script.requests[1].messages[-1]
    assert isinstance(sent, ToolResultMessage) and sent.is_error
    body = texts(sent)
    assert "args.age: -1 is less than the minimum of 0" in body
    assert "args.role: 'root' is not one of ['admin', 'user']" in body
    assert "Additional properties are not allowed ('extra' was unexpected)" in body


def test_retries_are_counted_and_once_spent_the_run_ends_in_an_error() -> None:
    bad = {"name": "Ada", "age": "old", "role": "admin"}
    replies = [answer(bad, f"c{n}") for n in range(1, 5)]
    response, state, script = run(replies, OutputSpec(schema=PERSON, retries=1))
    assert response.stop_reason == "error"
    assert len(script.requests) == 2  # one answer and one retry
    assert response.error_message is not None
    assert "No valid output after 2 attempts (output_retries=1)" in response.error_message
    assert "args.age: 'old' is not of type 'integer'" in response.error_message
    assert response.output is None
    # Every call still has its result: the history can be sent again.
    results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
    assert [m.tool_call_id for m in results] == ["c1", "c2"]


def test_zero_retries_end_the_run_at_the_first_refusal() -> None:
    response, _state, script = run(
        [answer({"name": 1}), answer(GOOD, "c2")], OutputSpec(schema=PERSON, retries=0)
    )
    assert response.stop_reason == "error" and len(script.requests) == 1


def test_a_prose_answer_is_sent_back_asking_for_the_output_tool() -> None:
    response, state, script = run([text("Ada is an admin."), answer(GOOD)], OutputSpec(schema=PERSON))
    assert response.output == GOOD
    asked = script.requests[1].messages[-1]
    assert isinstance(asked, UserMessage)
    assert "not JSON" in texts(asked)
    assert "calling the final_answer tool" in texts(asked)
    assert asked in state.messages


def test_a_text_answer_that_is_valid_json_is_taken_even_in_the_tool_mode() -> None:
    fenced = '```json\n{"name": "Ada", "age": 36, "role": "user"}\n```'
    response, state, _script = run([text(fenced)], OutputSpec(schema=PERSON))
    assert response.output == {"name": "Ada", "age": 36, "role": "user"}
    # The reply in the history stays plain data: only the run's response carries the output.
    assert state.messages[-1].to_dict().get("output") is None
    assert response.to_dict()["output"] == {"name": "Ada", "age": 36, "role": "user"}


def test_json_with_nan_is_refused() -> None:
    response, _state, script = run(
        [text('{"name": "Ada", "age": NaN, "role": "user"}'), answer(GOOD)], OutputSpec(schema=PERSON)
    )
    assert "not JSON" in texts(script.requests[1].messages[-1])
    assert response.output == GOOD


def test_tools_first_then_the_output() -> None:
    replies = [answer({"q": "Ada"}, "c1", "lookup"), answer(GOOD, "c2")]
    response, state, script = run(replies, OutputSpec(schema=PERSON), [lookup_tool()])
    assert response.output == GOOD
    assert list(script.requests[0].tools) == ["lookup", "final_answer"]
    assert [m.tool_name for m in state.messages if isinstance(m, ToolResultMessage)] == [
        "lookup",
        "final_answer",
    ]
    assert texts(script.requests[1].messages[-1]) == "Ada Lovelace, 36, admin"


def test_a_tool_that_gives_the_output_ends_the_run_without_another_llm_call() -> None:
    given = AgentToolResult("found", output=dict(GOOD))
    response, state, script = run(
        [answer({"q": "Ada"}, "c1", "lookup")], OutputSpec(schema=PERSON), [lookup_tool(given)]
    )
    assert len(script.requests) == 1
    assert response.stop_reason == "stop" and response.output == GOOD
    assert isinstance(state.messages[-1], ToolResultMessage)


def test_a_tools_output_that_does_not_fit_the_schema_ends_the_run_naming_the_tool() -> None:
    given = AgentToolResult("found", output={"name": "Ada"})
    response, _state, script = run(
        [answer({"q": "Ada"}, "c1", "lookup")], OutputSpec(schema=PERSON), [lookup_tool(given)]
    )
    assert len(script.requests) == 1
    assert response.stop_reason == "error"
    assert response.error_message is not None
    assert 'Tool "lookup" gave an output that does not fit' in response.error_message
    assert "'age' is a required property" in response.error_message


def test_terminate_with_an_output_keeps_the_terminated_response() -> None:
    given = AgentToolResult("done", terminate=True, output=dict(GOOD))
    response, _state, script = run(
        [answer({"q": "Ada"}, "c1", "lookup")], OutputSpec(schema=PERSON), [lookup_tool(given)]
    )
    assert response.stop_reason == "tool_use_terminated"
    assert response.output == GOOD
    assert len(script.requests) == 1


def test_a_tools_output_without_a_schema_ends_the_run_with_it() -> None:
    given = AgentToolResult("found", output={"any": "thing"})
    script = Script([answer({"q": "Ada"}, "c1", "lookup")])
    state = AgentState(tools=[lookup_tool(given)])
    response = run_loop([UserMessage("?")], state, RunConfig(llm_call=script))
    assert response.output == {"any": "thing"} and len(script.requests) == 1


def test_a_validate_output_hook_refuses_with_its_message_then_accepts() -> None:
    seen: list[Any] = []

    def validate(value: Any) -> str | None:
        seen.append(value)
        return "Ada is not 36 any more" if len(seen) == 1 else None

    response, _state, script = run(
        [answer(GOOD), answer(GOOD, "c2")], OutputSpec(schema=PERSON, validate=validate)
    )
    assert response.output == GOOD and len(seen) == 2
    refused = script.requests[1].messages[-1]
    assert isinstance(refused, ToolResultMessage) and refused.is_error
    assert "Ada is not 36 any more" in texts(refused)


def test_a_validate_output_hook_may_raise_output_rejected() -> None:
    def validate(value: Any) -> None:
        raise OutputRejected("the name must be in capitals")

    response, _state, _script = run(
        [answer(GOOD), answer(GOOD, "c2")], OutputSpec(schema=PERSON, validate=validate, retries=1)
    )
    assert response.stop_reason == "error"
    assert response.error_message is not None and "the name must be in capitals" in response.error_message


def test_a_schema_that_is_not_an_object_is_wrapped_for_the_model_and_unwrapped_after() -> None:
    numbers = {"type": "array", "items": {"type": "integer"}}
    response, _state, script = run([answer({"value": [1, 2, 3]})], OutputSpec(schema=numbers))
    assert response.output == [1, 2, 3]
    assert script.requests[0].tools["final_answer"].input_schema["properties"] == {"value": numbers}


def test_an_agent_tool_with_the_output_tools_name_is_an_error_response() -> None:
    clash = AgentTool("final_answer", "x", "x", {"type": "object"}, lambda *_: AgentToolResult("x"))
    response, _state, script = run([answer(GOOD)], OutputSpec(schema=PERSON), [clash])
    assert response.stop_reason == "error" and not script.requests
    assert response.error_message is not None and 'named "final_answer"' in response.error_message


# -- the native mode ----------------------------------------------------------------------------


def test_the_native_mode_asks_with_a_response_format_and_reads_the_text() -> None:
    response, state, script = run(
        [text('{"name": "Ada", "age": 36, "role": "admin"}')], OutputSpec(schema=PERSON, mode="native")
    )
    request = script.requests[0]
    assert "final_answer" not in request.tools
    assert request.output is not None and request.output.schema == PERSON
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "final_answer", "schema": PERSON},
    }
    assert response.output == GOOD
    assert response.content == state.messages[-1].content
    assert state.messages[-1].output is None


def test_the_native_mode_sends_an_invalid_answer_back_as_a_user_message_with_paths() -> None:
    replies = [
        text('{"name": "Ada", "age": 1.5, "role": "admin"}'),
        text('{"name": "Ada", "age": 36, "role": "admin"}'),
    ]
    response, _state, script = run(replies, OutputSpec(schema=PERSON, mode="native"))
    assert response.output == GOOD
    asked = script.requests[1].messages[-1]
    assert isinstance(asked, UserMessage)
    assert "output.age: 1.5 is not of type 'integer'" in texts(asked)
    assert "answer with only a JSON value" in texts(asked)


def test_a_failed_reply_ends_the_run_as_it_is() -> None:
    failed = AssistantMessage([], stop_reason="error", error_message="boom")
    response, _state, script = run([failed], OutputSpec(schema=PERSON, mode="native"))
    assert response is failed and len(script.requests) == 1


def test_a_request_dict_of_a_custom_formatter_gets_the_response_format() -> None:
    seen: list[Any] = []

    def llm(request: Any) -> AssistantMessage:
        seen.append(request)
        return text('{"name": "Ada", "age": 36, "role": "admin"}')

    config = RunConfig(
        llm_call=llm,
        format_msg_for_llm=lambda ctx: {"messages": [], "tools": []},
        output=OutputSpec(schema=PERSON, mode="native"),
    )
    response = run_loop([UserMessage("?")], AgentState(), config)
    assert seen[0]["response_format"]["json_schema"]["schema"] == PERSON
    assert response.output == GOOD


# -- the spec itself ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "says"),
    [
        ({"schema": {"type": "nope"}}, ValueError, "output_schema is not a valid JSON Schema"),
        ({"schema": "a string"}, TypeError, "must be a JSON Schema"),
        ({"schema": PERSON, "mode": "json"}, ValueError, "output_mode must be one of"),
        ({"schema": PERSON, "retries": -1}, ValueError, "output_retries must be an int >= 0"),
        ({"schema": PERSON, "validate": "x"}, TypeError, "validate must be callable"),
    ],
)
def test_an_unusable_spec_is_refused_at_construction(
    options: dict[str, Any], error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says):
        OutputSpec(**options)


def test_the_assistant_messages_output_survives_a_dict_round_trip() -> None:
    message = AssistantMessage([TextContent("{}")], output={"a": [1, 2]})
    assert AssistantMessage.from_dict(message.to_dict()).output == {"a": [1, 2]}
    assert "output" not in AssistantMessage([TextContent("x")]).to_dict()


def test_a_wrapped_schema_takes_a_bare_value_from_text_and_from_a_tool() -> None:
    numbers = {"type": "array", "items": {"type": "integer"}}
    response, _state, _script = run([text("[4, 5]")], OutputSpec(schema=numbers, mode="native"))
    assert response.output == [4, 5]
    given = AgentToolResult("found", output=[6])
    response, _state, _script = run(
        [answer({"q": "x"}, "c1", "lookup")], OutputSpec(schema=numbers), [lookup_tool(given)]
    )
    assert response.output == [6]


def test_every_refusal_the_loop_sends_back_is_recognised_as_one() -> None:
    from yiemagent.core._output import is_refusal

    def bad_convert(_value: Any) -> Any:
        raise ValueError("no")

    cases = [
        (OutputSpec(schema=PERSON), "not json"),
        (OutputSpec(schema=PERSON), '{"name": 1}'),
        (OutputSpec(schema=PERSON, convert=bad_convert), '{"name": "Ada", "age": 36, "role": "user"}'),
        (OutputSpec(schema=PERSON, validate=lambda _v: "no"), '{"name": "Ada", "age": 36, "role": "user"}'),
    ]
    for spec, reply in cases:
        ok, problem = spec.accept_text(reply)
        assert not ok and is_refusal(spec.retry_text(problem)), problem
    assert not is_refusal("Who is Ada?")


# --- a reply is judged in linear time --------------------------------------------------------

FENCE_REGEX = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n```$", re.DOTALL)  # the old rule, as reference


@given(st.lists(st.sampled_from(["```", "`", "\n", " ", "\t", "json", "{}", '{"a": 1}', "x"]), max_size=12))
def test_a_fenced_block_is_unfenced_as_the_old_rule_did(pieces: list[str]) -> None:
    body = "".join(pieces).strip()
    matched = FENCE_REGEX.match(body)
    assert _unfenced(body) == (matched.group(1).strip() if matched else body)


@pytest.mark.parametrize(
    ("reply", "taken"),
    [
        ('```json\n{"name": "Ada", "age": 36, "role": "admin"}\n```', True),
        ('```\n\n  {"name": "Ada", "age": 36, "role": "admin"}  \n\n```', True),
        ('{"name": "Ada", "age": 36, "role": "admin"}', True),
        ('```json {"name": "Ada", "age": 36, "role": "admin"}```', False),  # no line break: not a block
    ],
)
def test_a_fenced_or_bare_json_answer_is_read(reply: str, taken: bool) -> None:
    assert OutputSpec(schema=PERSON).accept_text(reply)[0] is taken


HOSTILE_REPLIES = {
    "fence_then_line_breaks": "'```json' + '\\n' * SIZE + 'x'",
    "fence_line_breaks_and_an_unclosed_value": "'```json' + '\\n' * SIZE + '{'",
    "many_fences": "'```\\n' * (SIZE // 4)",
    "fence_spaces_no_close": "'```' + ' \\n' * (SIZE // 2) + '``'",
    "deep_brackets": "'```json\\n' + '[' * SIZE + '\\n```'",
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("shape", list(HOSTILE_REPLIES))
def test_a_20_mb_hostile_reply_is_judged_and_refused(shape: str) -> None:
    """A child interpreter judges a 20 MB reply of each shape: the old fence rule took minutes on
    the first (quadratic backtracking, holding the GIL). The timeout only guards against a hang;
    ``scripts/bench.py`` is where speed is measured."""
    code = (
        "from yiemagent.core._output import OutputSpec\n"
        f"SIZE = 20 * 1024 * 1024\nreply = {HOSTILE_REPLIES[shape]}\n"
        "ok, problem = OutputSpec(schema={'type': 'object'}).accept_text(reply)\n"
        "print(ok, problem)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("False The answer is not JSON."), done.stdout[:300]


# --- every valid schema is accepted; a refusal names the output schema -------------------------

LIST_OF_MODELS = {  # what pydantic's TypeAdapter(list[Model]).json_schema() writes
    "$defs": {
        "Model": {
            "properties": {"x": {"title": "X", "type": "integer"}},
            "required": ["x"],
            "title": "Model",
            "type": "object",
        }
    },
    "items": {"$ref": "#/$defs/Model"},
    "type": "array",
}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "$ref": "#"},
        {"$ref": "#"},
        {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}},
        {"type": "array", "items": {"$ref": "#/$defs/a"}, "$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}},
        {
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/a"}},
            "$defs": {"a": {"not": {"$ref": "#/$defs/a"}}},
        },
        {"anyOf": [{"type": "string"}, {"$ref": "#"}]},
    ],
)
def test_a_schema_that_refers_to_itself_without_end_is_refused_naming_the_output_schema(
    schema: dict[str, Any],
) -> None:
    """Checking any value against these recursed until Python's stack ran out: the run ended
    with a bare RecursionError text. They are refused where they are given."""
    with pytest.raises(ValueError, match=r"^output_schema refers to itself without end \(at "):
        OutputSpec(schema=schema)


def test_a_list_of_models_with_root_definitions_is_the_runs_output() -> None:
    response, _state, script = run(
        [answer({"value": [{"x": 1}, {"x": 2}]})], OutputSpec(schema=LIST_OF_MODELS)
    )
    assert response.stop_reason == "stop", response.error_message
    assert response.output == [{"x": 1}, {"x": 2}]
    wire = script.requests[0].tools["final_answer"].input_schema
    assert wire["$defs"] == LIST_OF_MODELS["$defs"]  # the references find their definitions at the root
    assert wire["properties"]["value"]["items"] == {"$ref": "#/$defs/Model"}
    ok, problem = OutputSpec(schema=LIST_OF_MODELS).accept({"value": [{"x": "one"}]})
    assert not ok and "output.value[0].x: 'one' is not of type 'integer'" in problem


def test_references_into_a_wrapped_schemas_root_follow_it() -> None:
    nested = {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#"}]}}
    spec = OutputSpec(schema=nested)
    assert spec.accept({"value": [1, [2, [3]]]}) == (True, [1, [2, [3]]])
    assert spec.accept({"value": [1, ["x"]]})[0] is False
    with_id = {
        "$id": "urn:example:list",
        "type": "array",
        "items": {"$ref": "#/$defs/n"},
        "$defs": {"n": {"type": "integer"}},
    }
    assert OutputSpec(schema=with_id).accept({"value": [1, 2]}) == (True, [1, 2])  # its own resource


def test_a_reference_that_does_not_resolve_is_refused_naming_the_output_schema() -> None:
    with pytest.raises(ValueError) as info:
        OutputSpec(schema={"type": "array", "items": {"$ref": "#/$defs/missing"}})
    assert str(info.value).startswith("output_schema has a $ref '#/$defs/missing'")
    assert "final_answer" not in str(info.value) and "input_schema" not in str(info.value)


def test_a_value_breaking_its_schema_thousands_of_times_lists_ten_and_counts_a_thousand() -> None:
    """Every violation of a 20 MB answer was built, sorted and counted (a minute); the first
    thousand are looked at, ten shown."""
    items = {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    ok, problem = OutputSpec(schema=items).accept({"value": [{"n": "x"}] * 5000})
    assert not ok
    assert problem.count("\n  - output.value[") == 10
    assert "  ... and more than 990 more violations (not shown)" in problem
    ok, problem = OutputSpec(schema=items).accept({"value": [{"n": "x"}] * 15})
    assert "  ... and 5 more violations (not shown)" in problem  # under the cap, counted exactly


def test_a_large_valid_answer_takes_the_fast_check_and_a_fast_check_miss_still_judges() -> None:
    items = {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    spec = OutputSpec(schema=items)
    assert spec.tool.fast_check is not None
    assert spec.accept({"value": [{"n": 1}] * 10_000}) == (True, [{"n": 1}] * 10_000)
    assert spec.accept({"value": [{"n": 1}, {"n": 1.5}]})[0] is False  # jsonschema decides
