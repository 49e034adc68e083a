"""Argument preparation and validation: schema violations, custom validators, prepare_arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pipeline_helpers import WEATHER_SCHEMA, make_tool, text

from yiemagent import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolCall,
    AssistantMessage,
    ImmediateOutcome,
    PreparedToolCall,
    prepare_tool_call,
    prepare_tool_call_arguments,
    validate_required_args,
    validate_tool_arguments,
)
from yiemagent.errors import ToolArgumentError

ITEMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["name"],
            },
        },
    },
    "required": ["items"],
}


# --- validate_required_args (the default, whole-schema check) -----------------------------------


def test_valid_arguments_give_none() -> None:
    assert validate_required_args({"city": "Tokyo", "units": "metric"}, WEATHER_SCHEMA) is None


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ({}, "  - args: 'city' is a required property"),
        ({"city": 42}, "  - args.city: 42 is not of type 'string'"),
        (
            {"city": "Oslo", "units": "kelvin"},
            "  - args.units: 'kelvin' is not one of ['metric', 'imperial']",
        ),
        ({"city": "Oslo", "days": 0}, "  - args.days: 0 is less than the minimum of 1"),
        (
            {"city": "Oslo", "colour": "red"},
            "  - args: Additional properties are not allowed ('colour' was unexpected)",
        ),
    ],
)
def test_each_kind_of_violation_is_reported_with_its_path(args: dict[str, Any], line: str) -> None:
    report = validate_required_args(args, WEATHER_SCHEMA)
    assert report is not None
    assert report.splitlines() == [line]


def test_nested_paths_use_dots_and_indices() -> None:
    report = validate_required_args({"items": [{"qty": 1}, {"name": 5}]}, ITEMS_SCHEMA)
    assert report is not None
    assert report.splitlines() == [
        "  - args.items[0]: 'name' is a required property",
        "  - args.items[1].name: 5 is not of type 'string'",
    ]


def test_every_violation_is_listed() -> None:
    report = validate_required_args({"units": "kelvin", "days": "two", "x": 1}, WEATHER_SCHEMA)
    assert report is not None
    lines = report.splitlines()
    assert len(lines) == 4
    assert any("'city' is a required property" in s for s in lines)
    assert any(s.startswith("  - args.units: 'kelvin' is not one of") for s in lines)
    assert any(s.startswith("  - args.days: 'two' is not of type 'integer'") for s in lines)
    assert any("Additional properties" in s for s in lines)


def test_arguments_that_are_not_an_object_are_a_violation() -> None:
    report = validate_required_args(["Tokyo"], WEATHER_SCHEMA)
    assert report == "  - args: ['Tokyo'] is not of type 'object'"


def test_an_invalid_schema_raises() -> None:
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        validate_required_args({}, {"type": "nope"})


# --- validate_tool_arguments ----------------------------------------------------------------------


def test_tool_validation_error_names_the_tool_lists_violations_then_the_arguments() -> None:
    tool = make_tool("getWeather", schema=WEATHER_SCHEMA)
    args = {"units": "kelvin", "city": 7}
    with pytest.raises(ToolArgumentError) as info:
        validate_tool_arguments(tool, AgentToolCall("c1", "getWeather", args))
    message = str(info.value)
    head, _, received = message.partition("\n\nReceived arguments:\n")
    assert head.splitlines() == [
        'Validation failed for tool "getWeather":',
        "  - args.city: 7 is not of type 'string'",
        "  - args.units: 'kelvin' is not one of ['metric', 'imperial']",
    ]
    assert json.loads(received) == args


def test_tool_validation_returns_a_copy_of_valid_arguments() -> None:
    tool = make_tool("getWeather", schema=WEATHER_SCHEMA)
    args = {"city": "Tokyo", "units": "metric"}
    call = AgentToolCall("c1", "getWeather", args)
    out = validate_tool_arguments(tool, call)
    assert out == args
    out["city"] = "changed"
    assert call.arguments["city"] == "Tokyo"


def test_custom_validator_replaces_the_schema_check() -> None:
    seen: list[Any] = []

    def validate(args: dict[str, Any]) -> str | None:
        seen.append(args)
        return None if args.get("code") == "ok" else "code must be 'ok'"

    # The schema alone would reject {"code": "ok"}: the custom validator decides instead.
    tool = make_tool(
        "custom", schema={"type": "object", "required": ["other"]}, validate_required_args=validate
    )
    assert validate_tool_arguments(tool, AgentToolCall("c", "custom", {"code": "ok"})) == {"code": "ok"}
    with pytest.raises(ToolArgumentError) as info:
        validate_tool_arguments(tool, AgentToolCall("c", "custom", {"code": "no"}))
    assert str(info.value).startswith("Validation failed for tool \"custom\":\n  - code must be 'ok'\n")
    assert '"code": "no"' in str(info.value)
    assert seen == [{"code": "ok"}, {"code": "no"}]


# --- prepare_tool_call_arguments ------------------------------------------------------------------


def test_no_prepare_hook_returns_the_same_call() -> None:
    call = AgentToolCall("c", "t", {"a": 1})
    assert prepare_tool_call_arguments(make_tool("t"), call) is call


def test_prepare_hook_transforms_arguments_into_a_new_call() -> None:
    def prepare(args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "city": args["city"].strip().title()}

    tool = make_tool("t", prepare_arguments=prepare)
    call = AgentToolCall("c", "t", {"city": "  tokyo "})
    out = prepare_tool_call_arguments(tool, call)
    assert out is not call
    assert (out.id, out.name, out.arguments) == ("c", "t", {"city": "Tokyo"})
    assert call.arguments == {"city": "  tokyo "}


def test_prepare_hook_that_changes_nothing_keeps_the_call() -> None:
    tool = make_tool("t", prepare_arguments=lambda args: dict(args))
    call = AgentToolCall("c", "t", {"a": [1]})
    assert prepare_tool_call_arguments(tool, call) is call


def test_prepare_hook_editing_in_place_cannot_change_the_history() -> None:
    def prepare(args: dict[str, Any]) -> dict[str, Any]:
        args["added"] = True
        args["nested"].append(2)
        return args

    tool = make_tool("t", prepare_arguments=prepare)
    call = AgentToolCall("c", "t", {"nested": [1]})
    message = AssistantMessage([call])
    out = prepare_tool_call_arguments(tool, call)
    assert out.arguments == {"nested": [1, 2], "added": True}
    assert message.content[0] == AgentToolCall("c", "t", {"nested": [1]})


def test_prepare_hook_returning_a_non_dict_is_an_argument_error() -> None:
    tool = make_tool("t", prepare_arguments=lambda args: [args])
    with pytest.raises(ToolArgumentError, match='prepare_arguments of tool "t" returned list'):
        prepare_tool_call_arguments(tool, AgentToolCall("c", "t", {}))


def test_prepare_hook_runs_before_validation_in_the_pipeline() -> None:
    # The model sends "town"; the hook renames it to the required "city".
    def prepare(args: dict[str, Any]) -> dict[str, Any]:
        return {"city": args["town"]} if "town" in args else args

    tool = make_tool("getWeather", schema=WEATHER_SCHEMA, prepare_arguments=prepare)
    context = AgentContext(tools=[tool])
    call = AgentToolCall("c", "getWeather", {"town": "Oslo"})
    prep = prepare_tool_call(context, AssistantMessage([call]), call, AgentLoopConfig(), None)
    assert isinstance(prep, PreparedToolCall)
    assert prep.args == {"city": "Oslo"}
    assert prep.tool_call is call  # the original call is kept, as in the spec


@pytest.mark.parametrize(
    ("prepare", "expected"),
    [
        (lambda args: "nope", 'prepare_arguments of tool "t" returned str'),
        (lambda args: args["missing"], 'Preparing the arguments for tool "t" failed: KeyError'),
    ],
)
def test_prepare_failures_become_immediate_error_outcomes(prepare: Any, expected: str) -> None:
    tool = make_tool("t", prepare_arguments=prepare)
    call = AgentToolCall("c", "t", {})
    out = prepare_tool_call(
        AgentContext(tools=[tool]), AssistantMessage([call]), call, AgentLoopConfig(), None
    )
    assert isinstance(out, ImmediateOutcome)
    assert out.is_error
    assert expected in text(out.result)


def test_custom_validator_that_raises_becomes_an_error_outcome() -> None:
    def validate(_args: dict[str, Any]) -> str | None:
        raise RuntimeError("validator crashed")

    tool = make_tool("t", validate_required_args=validate)
    call = AgentToolCall("c", "t", {})
    out = prepare_tool_call(
        AgentContext(tools=[tool]), AssistantMessage([call]), call, AgentLoopConfig(), None
    )
    assert isinstance(out, ImmediateOutcome) and out.is_error
    assert "RuntimeError: validator crashed" in text(out.result)


def test_a_tool_schema_that_refers_to_itself_without_end_is_refused_naming_the_tool() -> None:
    """Checking arguments against it would recurse until the stack ran out; an MCP server or a
    tool file may send one, so it is refused when the tool is made."""
    with pytest.raises(ValueError, match=r'^Tool "loop": input_schema refers to itself without end'):
        AgentTool("loop", "loop", "d", {"type": "object", "allOf": [{"$ref": "#"}]}, lambda *_: "x")
    tree = {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}}
    assert AgentTool("tree", "tree", "d", tree, lambda *_: "x").name == "tree"  # recursion into parts is fine
