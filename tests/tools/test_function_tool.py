"""function_tool: schemas from type hints, descriptions from docstrings, results from returns.

This module uses ``from __future__ import annotations`` on purpose: every hint below is a string
that ``function_tool`` must resolve.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal, Optional, Union

import pytest

from yiemagent.core._content import AgentToolCall, TextContent
from yiemagent.core._messages import AssistantMessage, ToolResultMessage
from yiemagent.core._pipeline import execute_tool_calls
from yiemagent.core._tools import AbortSignal, AgentContext, AgentLoopConfig, AgentTool, AgentToolResult
from yiemagent.tools._function_tool import function_tool, parse_docstring, to_tool_result


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


def props(tool: AgentTool) -> dict[str, Any]:
    return tool.input_schema["properties"]  # type: ignore[no-any-return]


def call(tool: AgentTool, args: dict[str, Any]) -> ToolResultMessage:
    """Run one call through the real pipeline (validation included) and return its message."""
    message = AssistantMessage(content=[AgentToolCall("call-1", tool.name, args)])
    batch = execute_tool_calls(
        AgentContext("", [], {tool.name: tool}),
        message,
        [AgentToolCall("call-1", tool.name, args)],
        AgentLoopConfig(),
        None,
        None,
    )
    return batch.messages[0]


def text(message: ToolResultMessage | AgentToolResult) -> str:
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))


# -- schemas from hints -------------------------------------------------------------------------


def test_scalar_hints() -> None:
    @function_tool
    def scalars(s: str, i: int, f: float, b: bool, n: None) -> str:
        return "ok"

    assert props(scalars) == {
        "s": {"type": "string"},
        "i": {"type": "integer"},
        "f": {"type": "number"},
        "b": {"type": "boolean"},
        "n": {"type": "null"},
    }
    assert scalars.input_schema["required"] == ["s", "i", "f", "b", "n"]
    assert scalars.input_schema["additionalProperties"] is False


def test_container_hints() -> None:
    @function_tool
    def containers(
        names: list[str],
        scores: dict[str, float],
        raw: list,
        blob: dict,  # type: ignore[type-arg]
        nested: list[dict[str, int]],
    ) -> str:
        return "ok"

    assert props(containers) == {
        "names": {"type": "array", "items": {"type": "string"}},
        "scores": {"type": "object", "additionalProperties": {"type": "number"}},
        "raw": {"type": "array"},
        "blob": {"type": "object"},
        "nested": {"type": "array", "items": {"type": "object", "additionalProperties": {"type": "integer"}}},
    }


def test_optional_and_union_hints() -> None:
    @function_tool
    def unions(a: Optional[int], b: str | None, c: Union[int, str], d: list[int] | None) -> str:  # noqa: UP007, UP045
        return "ok"

    assert props(unions)["a"] == {"type": ["integer", "null"]}
    assert props(unions)["b"] == {"type": ["string", "null"]}
    assert props(unions)["c"] == {"type": ["integer", "string"]}
    int_list = {"type": "array", "items": {"type": "integer"}}
    assert props(unions)["d"] == {"anyOf": [int_list, {"type": "null"}]}


def test_literal_and_enum_hints() -> None:
    @function_tool
    def choices(mode: Literal["fast", "slow"], color: Color, level: Level, mixed: Literal[1, "a"]) -> str:
        return "ok"

    assert props(choices) == {
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "color": {"type": "string", "enum": ["red", "blue"]},
        "level": {"type": "integer", "enum": [1, 2]},
        "mixed": {"enum": [1, "a"]},
    }


def test_annotated_and_any_hints() -> None:
    @function_tool
    def extras(city: Annotated[str, "The city to look up."], anything: Any) -> str:
        return "ok"

    assert props(extras) == {
        "city": {"type": "string", "description": "The city to look up."},
        "anything": {},
    }


def test_defaults_make_parameters_optional() -> None:
    @function_tool
    def defaults(
        city: str,
        days: int = 3,
        color: Color = Color.BLUE,
        note: str = None,  # type: ignore[assignment]  # noqa: RUF013
        tags: list[str] | None = None,
        mode: Literal["a", "b"] | None = None,
    ) -> str:
        return "ok"

    assert defaults.input_schema["required"] == ["city"]
    assert props(defaults)["days"] == {"type": "integer", "default": 3}
    assert props(defaults)["color"] == {"type": "string", "enum": ["red", "blue"], "default": "blue"}
    assert props(defaults)["note"] == {"type": ["string", "null"], "default": None}
    assert props(defaults)["tags"]["default"] is None
    assert call(defaults, {"city": "x", "note": None, "mode": None}).is_error is False


@pytest.mark.parametrize(
    "default",
    [float("nan"), float("inf"), -float("inf"), [1.0, float("nan")]],
    ids=["nan", "inf", "-inf", "nested"],
)
def test_nan_or_infinite_defaults_are_refused_at_decoration(default: Any) -> None:
    def scaled(factor: Any = default) -> str:
        return "ok"

    with pytest.raises(TypeError, match=r"parameter 'factor' .* holds NaN or infinity"):
        function_tool(scaled)


def test_a_default_that_is_not_json_is_left_out_of_the_schema() -> None:
    marker = object()

    @function_tool
    def pick(choice: Any = marker) -> str:
        return "ok"

    assert "default" not in props(pick)["choice"]


def test_a_function_without_parameters() -> None:
    @function_tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    assert ping.input_schema == {"type": "object", "properties": {}, "additionalProperties": False}
    assert text(call(ping, {})) == "pong"


# -- unsupported hints --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "fragment"),
    [
        ("set[int]", "unsupported type hint"),
        ("tuple[int, int]", "unsupported type hint"),
        ("complex", "unsupported type hint"),
        ("dict[int, str]", "dict keys must be str"),
        ("Literal[1.5j]", "not JSON scalars"),
    ],
)
def test_unsupported_hints_raise_at_decoration_naming_function_and_parameter(
    annotation: str, fragment: str
) -> None:
    namespace: dict[str, Any] = {"Literal": Literal}
    exec(f"def weird(good: int, bad: {annotation}) -> str:\n    return ''", namespace)
    with pytest.raises(TypeError) as info:
        function_tool(namespace["weird"])
    assert "parameter 'bad' of function 'weird'" in str(info.value)
    assert fragment in str(info.value)


def test_missing_hint_raises() -> None:
    def untyped(city):  # type: ignore[no-untyped-def]
        return city

    with pytest.raises(TypeError, match=r"parameter 'city' of function .*untyped.* has no type hint"):
        function_tool(untyped)


def test_var_args_raise() -> None:
    def spread(*items: str) -> str:
        return ""

    with pytest.raises(TypeError, match="parameter 'items'"):
        function_tool(spread)


def test_unresolvable_hint_raises() -> None:
    def dangling(x: NoSuchType) -> str:  # type: ignore[name-defined]  # noqa: F821
        return ""

    with pytest.raises(TypeError, match="cannot resolve the type hints"):
        function_tool(dangling)


# -- docstrings ---------------------------------------------------------------------------------


def test_google_docstring() -> None:
    @function_tool
    def forecast(city: str, days: int = 1) -> str:
        """Get the forecast for a city.

        Uses the public forecast service.

        Args:
            city (str): Name of the city,
                e.g. Paris.
            days: How many days ahead.

        Returns:
            The forecast as text.
        """
        return city

    assert forecast.description == "Get the forecast for a city.\n\nUses the public forecast service."
    assert props(forecast)["city"]["description"] == "Name of the city, e.g. Paris."
    assert props(forecast)["days"]["description"] == "How many days ahead."


def test_numpy_docstring() -> None:
    @function_tool
    def convert(amount: float, currency: str, rounding: bool = True) -> str:
        """Convert money between currencies.

        Parameters
        ----------
        amount : float
            How much money.
        currency : str
            Target currency code,
            like EUR.
        rounding : bool, optional
            Round to cents.

        Returns
        -------
        str
            The converted amount.
        """
        return ""

    assert convert.description == "Convert money between currencies."
    assert props(convert)["amount"]["description"] == "How much money."
    assert props(convert)["currency"]["description"] == "Target currency code, like EUR."
    assert props(convert)["rounding"]["description"] == "Round to cents."


def test_parse_docstring_handles_shared_numpy_entries_and_no_docstring() -> None:
    doc = "Sum.\n\nParameters\n----------\nx, y : int\n    A number.\n"
    assert parse_docstring(doc) == ("Sum.", {"x": "A number.", "y": "A number."})
    assert parse_docstring(None) == ("", {})


def test_explicit_metadata_overrides_the_docstring() -> None:
    @function_tool(name="lookUp", label="Look It Up", description="Custom.", parallel=True, timeout_s=5)
    def look_up(query: str) -> str:
        """Docstring summary."""
        return query

    assert (look_up.name, look_up.label, look_up.description) == ("lookUp", "Look It Up", "Custom.")
    assert look_up.parallel_tool_execute is True
    assert look_up.timeout_s == 5


def test_defaults_for_name_label_and_description() -> None:
    @function_tool
    def get_exchange_rate(base: str) -> str:
        return base

    assert get_exchange_rate.name == "get_exchange_rate"
    assert get_exchange_rate.label == "Get Exchange Rate"
    assert get_exchange_rate.description == "Get Exchange Rate"
    assert get_exchange_rate.parallel_tool_execute is False


# -- calling ------------------------------------------------------------------------------------


def test_results_from_each_kind_of_return_value() -> None:
    @function_tool
    def give(kind: str) -> Any:
        values: dict[str, Any] = {
            "str": "plain text",
            "dict": {"b": 1, "a": "é"},
            "list": [1, 2],
            "int": 7,
            "none": None,
            "result": AgentToolResult([TextContent("made by hand")], {"k": 1}),
        }
        return values[kind]

    assert text(call(give, {"kind": "str"})) == "plain text"
    dict_message = call(give, {"kind": "dict"})
    assert text(dict_message) == '{"b": 1, "a": "é"}'
    assert dict_message.details == {"result": {"b": 1, "a": "é"}}
    assert text(call(give, {"kind": "list"})) == "[1, 2]"
    assert text(call(give, {"kind": "int"})) == "7"
    assert text(call(give, {"kind": "none"})) == "null"
    by_hand = call(give, {"kind": "result"})
    assert (text(by_hand), by_hand.details) == ("made by hand", {"k": 1})


def test_a_value_that_is_not_json_ready_is_an_error_result() -> None:
    @function_tool
    def give_object() -> Any:
        return object()

    message = call(give_object, {})
    assert message.is_error
    assert 'tool "give_object" returned object, which is not JSON-ready' in text(message)


def test_to_tool_result_directly() -> None:
    assert text(to_tool_result("hi")) == "hi"
    with pytest.raises(TypeError, match='tool "x" returned set'):
        to_tool_result({1}, "x")


def test_enum_arguments_arrive_as_members() -> None:
    seen: list[Any] = []

    @function_tool
    def paint(
        color: Color,
        level: Level,
        extra: list[Color] | None = None,
        by_name: dict[str, Color] | None = None,
        maybe: Color | None = None,
    ) -> str:
        seen.extend([color, level, extra, by_name, maybe])
        return "painted"

    call(paint, {"color": "red", "level": 2, "extra": ["blue"], "by_name": {"x": "red"}, "maybe": None})
    assert seen == [Color.RED, Level.HIGH, [Color.BLUE], {"x": Color.RED}, None]


def test_integral_floats_arrive_as_int() -> None:
    @function_tool
    def count(n: int) -> int:
        assert type(n) is int
        return n + 1

    assert text(call(count, {"n": 3.0})) == "4"


def test_omitted_optional_arguments_use_the_function_default() -> None:
    @function_tool
    def greet(name: str, greeting: str = "Hello") -> str:
        return f"{greeting}, {name}!"

    assert text(call(greet, {"name": "Ada"})) == "Hello, Ada!"
    assert text(call(greet, {"name": "Ada", "greeting": "Hi"})) == "Hi, Ada!"


def test_positional_only_parameters() -> None:
    @function_tool
    def divide(a: float, b: float = 2.0, /) -> float:
        return a / b

    assert text(call(divide, {"a": 9})) == "4.5"
    assert text(call(divide, {"a": 9, "b": 3})) == "3.0"


def test_the_schema_is_enforced_by_the_pipeline() -> None:
    @function_tool
    def typed(count: int, mode: Literal["a", "b"]) -> str:
        return "ran"

    wrong = call(typed, {"count": "three", "mode": "c", "extra": 1})
    assert wrong.is_error
    assert "args.count: 'three' is not of type 'integer'" in text(wrong)
    assert "args.mode: 'c' is not one of ['a', 'b']" in text(wrong)
    assert "'extra' was unexpected" in text(wrong)


def test_signal_and_on_partial_result_are_passed_and_not_in_the_schema() -> None:
    received: dict[str, Any] = {}

    @function_tool
    def slow(job: str, signal: AbortSignal | None = None, on_partial_result: Any = None) -> str:
        received["signal"] = signal
        on_partial_result(f"working on {job}")
        return "done"

    assert list(props(slow)) == ["job"]
    partials: list[Any] = []
    abort = AbortSignal()
    result = slow.execute("call-1", {"job": "x"}, abort, partials.append)
    assert text(result) == "done"
    assert received["signal"] is abort
    assert partials == ["working on x"]


def test_an_exception_becomes_an_error_result() -> None:
    @function_tool
    def fails(x: int) -> str:
        raise ValueError(f"bad x {x}")

    message = call(fails, {"x": 1})
    assert message.is_error and "ValueError: bad x 1" in text(message)


def test_non_callables_are_refused() -> None:
    with pytest.raises(TypeError, match="expects a function"):
        function_tool(42)  # type: ignore[call-overload]


def test_needs_approval_is_given_to_the_tool() -> None:
    def delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    outside_tmp = lambda args, _context: not args["path"].startswith("/tmp/")  # noqa: E731
    assert function_tool(delete).needs_approval is False
    assert function_tool(needs_approval=True)(delete).needs_approval is True
    assert function_tool(needs_approval=outside_tmp)(delete).needs_approval is outside_tmp
    with pytest.raises(TypeError, match="needs_approval must be True, False or a function"):
        function_tool(needs_approval="yes")(delete)  # type: ignore[arg-type]
