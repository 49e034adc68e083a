"""Structured answers through ``YiemAgent``: ``output_schema`` on the agent and per prompt, the
types it accepts (a dataclass, a TypedDict, an attrs class, a pydantic model, type hints) coming
back as instances, a prompt with an output getting a run of its own, and bad options refused
where they are given."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, TypedDict

import attrs
import jsonschema
import pydantic
import pytest

from yiemagent import AgentToolCall, AssistantMessage, LlmRequest, TextContent, YiemAgent
from yiemagent.output import output_spec, schema_of

WAIT_S = 10.0


class Sky(enum.Enum):
    SUNNY = "sunny"
    RAINY = "rainy"


@dataclasses.dataclass
class Place:
    city: str
    country: str = "FR"


@dataclasses.dataclass
class Weather:
    place: Place
    temperature: int
    sky: Sky
    note: Optional[str] = None  # noqa: UP045 - the old spelling is what users write too


class WeatherDict(TypedDict):
    city: str
    temperature: int


@attrs.define
class WeatherAttrs:
    city: str
    temperature: int = 0


class WeatherModel(pydantic.BaseModel):
    city: str
    temperature: int
    sky: Literal["sunny", "rainy"]


@dataclasses.dataclass
class Report:
    weather: WeatherModel  # a pydantic model inside a dataclass: its $defs join the root
    tags: list[Annotated[str, "a short tag"]]


WEATHER_ARGS = {"place": {"city": "Paris"}, "temperature": 21.0, "sky": "sunny"}


def answering(args: Any) -> Any:
    """An ``llm_call`` that gives ``args`` to the output tool, keeping the requests it got."""
    requests: list[LlmRequest] = []

    def llm(request: LlmRequest) -> AssistantMessage:
        requests.append(request)
        return AssistantMessage(
            [AgentToolCall(f"c{len(requests)}", "final_answer", args)], stop_reason="toolUse"
        )

    llm.requests = requests  # type: ignore[attr-defined]
    return llm


def test_a_dataclass_comes_back_as_an_instance_with_nested_types_converted() -> None:
    with YiemAgent(llm_call=answering(WEATHER_ARGS), output_schema=Weather) as agent:
        response = agent.prompt("Weather in Paris?", timeout=WAIT_S)
    assert response.output == Weather(Place("Paris"), 21, Sky.SUNNY)
    assert type(response.output.temperature) is int
    assert response.to_dict()["output"] == {
        "place": {"city": "Paris", "country": "FR"},
        "temperature": 21,
        "sky": "sunny",
        "note": None,
    }


@pytest.mark.parametrize(
    ("schema", "args", "expected"),
    [
        (WeatherDict, {"city": "Oslo", "temperature": 3}, {"city": "Oslo", "temperature": 3}),
        (WeatherAttrs, {"city": "Oslo"}, WeatherAttrs("Oslo", 0)),
        (
            WeatherModel,
            {"city": "Oslo", "temperature": 3, "sky": "rainy"},
            WeatherModel(city="Oslo", temperature=3, sky="rainy"),
        ),
        (list[int], {"value": [1, 2]}, [1, 2]),
    ],
    ids=["typeddict", "attrs", "pydantic", "hint"],
)
def test_each_kind_of_type_comes_back_as_itself(schema: Any, args: Any, expected: Any) -> None:
    with YiemAgent(llm_call=answering(args)) as agent:
        response = agent.prompt("?", timeout=WAIT_S, output_schema=schema)
    assert response.stop_reason == "stop", response.error_message
    assert response.output == expected and type(response.output) is type(expected)


def test_a_pydantic_model_inside_a_dataclass_validates_through_the_hoisted_defs() -> None:
    schema = schema_of(Report)
    jsonschema.Draft202012Validator.check_schema(schema)
    good = {"weather": {"city": "Oslo", "temperature": 3, "sky": "rainy"}, "tags": ["cold"]}
    jsonschema.validate(good, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "weather": {"city": "Oslo"}}, schema)
    spec = output_spec(Report)
    ok, value = spec.accept(good)
    assert ok and value == Report(WeatherModel(city="Oslo", temperature=3, sky="rainy"), ["cold"])


def test_a_class_schema_requires_fields_without_defaults_and_allows_no_others() -> None:
    schema = schema_of(Weather)
    assert schema["required"] == ["place", "temperature", "sky"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["sky"] == {"type": "string", "enum": ["sunny", "rainy"]}
    assert schema["properties"]["place"]["required"] == ["city"]


@pytest.mark.parametrize(
    ("hint", "says"),
    [
        (tuple[int, str], "fixed-length tuples"),
        (dict[int, str], "dict keys must be str"),
        (set[int], "unsupported type"),
        (complex, "unsupported type"),
    ],
)
def test_an_unsupported_type_is_a_type_error_naming_it(hint: Any, says: str) -> None:
    with pytest.raises(TypeError, match=says):
        schema_of(hint)


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node]


def test_a_type_that_contains_itself_is_refused() -> None:
    with pytest.raises(TypeError, match="contains itself"):
        schema_of(Node)


def test_the_agents_schema_applies_to_every_run_and_a_prompts_own_only_to_its_run() -> None:
    llm = answering({"city": "Oslo", "temperature": 3})
    with YiemAgent(llm_call=llm, output_schema=WeatherDict) as agent:
        own = agent.prompt("?", timeout=WAIT_S, output_schema=WeatherAttrs)
        default = agent.prompt("?", timeout=WAIT_S)
    assert own.output == WeatherAttrs("Oslo", 3)
    assert default.output == {"city": "Oslo", "temperature": 3}


def test_a_prompt_with_an_output_does_not_join_an_active_run() -> None:
    entered, release = threading.Event(), threading.Event()
    seen: list[list[str]] = []

    def llm(request: LlmRequest) -> AssistantMessage:
        seen.append([b.text for m in request.messages for b in m.content if isinstance(b, TextContent)])
        if len(seen) == 1:
            entered.set()
            assert release.wait(WAIT_S)
            return AssistantMessage([TextContent("plain")])
        return AssistantMessage([AgentToolCall("c1", "final_answer", {"city": "Oslo", "temperature": 3})])

    with YiemAgent(llm_call=llm) as agent:
        agent.run_agent("first")
        assert entered.wait(WAIT_S)
        result: list[AssistantMessage] = []
        waiter = threading.Thread(
            target=lambda: result.append(agent.prompt("second", WAIT_S, output_schema=WeatherDict))
        )
        waiter.start()
        release.set()
        first = agent.take_response(timeout=WAIT_S)
        waiter.join(WAIT_S)
    assert first.output is None and first.stop_reason == "stop"
    assert result[0].output == {"city": "Oslo", "temperature": 3}
    assert seen[0] == ["first"]  # the second message never joined the first run
    assert seen[1] == ["first", "plain", "second"]


def test_aprompt_takes_the_same_options() -> None:
    async def main() -> AssistantMessage:
        with YiemAgent(llm_call=answering({"city": "Oslo", "temperature": 3})) as agent:
            return await agent.aprompt("?", timeout=WAIT_S, output_schema=WeatherDict)

    assert asyncio.run(main()).output == {"city": "Oslo", "temperature": 3}


def test_a_validate_output_hook_given_per_prompt_refuses_and_the_model_answers_again() -> None:
    llm = answering({"city": "Oslo", "temperature": 3})
    calls: list[Any] = []

    def validate(value: Any) -> str | None:
        calls.append(value)
        return "too cold" if len(calls) == 1 else None

    with YiemAgent(llm_call=llm) as agent:
        response = agent.prompt("?", timeout=WAIT_S, output_schema=WeatherDict, validate_output=validate)
    assert response.output == {"city": "Oslo", "temperature": 3}
    assert len(llm.requests) == 2


def test_the_session_holds_plain_data_and_loads_again(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    with YiemAgent(llm_call=answering(WEATHER_ARGS), output_schema=Weather) as agent:
        agent.prompt("?", timeout=WAIT_S)
        agent.save(path)
    loaded = YiemAgent.load(path, llm_call=answering(WEATHER_ARGS))
    try:
        assert [m.role for m in loaded.messages] == ["user", "assistant", "toolResult"]
    finally:
        loaded.shutdown()


def test_bad_options_are_refused_where_they_are_given() -> None:
    with pytest.raises(ValueError, match="output_mode must be one of"):
        YiemAgent(llm_call=answering({}), output_mode="json")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="output_retries must be an int >= 0"):
        YiemAgent(llm_call=answering({}), output_retries=-1)
    with YiemAgent(llm_call=answering({})) as agent:
        with pytest.raises(ValueError, match="need an output_schema"):
            agent.prompt("?", timeout=WAIT_S, output_mode="native")
        with pytest.raises(TypeError, match="output_schema must be"):
            agent.prompt("?", timeout=WAIT_S, output_schema="a person")
        assert agent.messages == []  # nothing was queued


def test_a_pydantic_list_schema_given_as_it_is_is_accepted() -> None:
    """``TypeAdapter(list[Model]).json_schema()`` puts its ``$defs`` at the root of an array
    schema: wrapping it for the model used to break its references, and the refusal blamed the
    output tool's input_schema."""
    schema = pydantic.TypeAdapter(list[WeatherModel]).json_schema()
    assert schema["type"] == "array" and schema["items"]["$ref"].startswith("#/$defs/")
    answer = {"value": [{"city": "Oslo", "temperature": 3, "sky": "rainy"}]}
    with YiemAgent(llm_call=answering(answer), output_schema=schema) as agent:
        response = agent.prompt("Weather in Oslo?", timeout=WAIT_S)
    assert response.stop_reason == "stop", response.error_message
    assert response.output == answer["value"]


def test_a_schema_that_refers_to_itself_is_refused_by_the_agent_naming_the_output_schema() -> None:
    with pytest.raises(ValueError, match=r"^output_schema refers to itself without end"):
        YiemAgent(llm_call=answering({}), output_schema={"type": "object", "$ref": "#"})
