"""A run that ends in data: the output's schema, how the model gives it, and how it is checked.

``OutputSpec`` holds what a run with an output needs: the JSON Schema the output must match,
``mode`` (``"tool"``: a final-answer tool beside the agent's tools; ``"native"``: the provider's
JSON-schema response format; ``"grammar"``: decoding constrained by the schema, on the embedded
model), ``retries`` (how many refused outputs go back to the model before the run ends in an
error), ``convert`` (validated JSON to the caller's type) and ``validate`` (the caller's own
check). ``accept`` checks a candidate with ``jsonschema`` against the whole schema, converts it
and runs ``validate``; every refusal is one text listing what is wrong, with paths, as a tool
call's invalid arguments are. The model always fills an object: a schema of another type is
wrapped as ``{"value": ...}`` on the wire and unwrapped here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from yiemagent.core._arguments import format_arguments, schema_violations
from yiemagent.core._content import TextContent, content_text
from yiemagent.core._json_safety import clip
from yiemagent.core._messages import AssistantMessage, UserMessage
from yiemagent.core._output_json import output_json
from yiemagent.core._output_request import OutputRequest
from yiemagent.core._request import LlmRequest
from yiemagent.core._responses import build_terminated_response
from yiemagent.core._run_points import RunFeature, RunView
from yiemagent.core._spec_format import response_format_view
from yiemagent.core._tools import (
    AgentContext,
    AgentTool,
    AgentToolCallBatch,
    AgentToolResult,
    compile_schema_validator,
)
from yiemagent.errors import OutputRejected, describe_error

__all__ = [
    "OUTPUT_MODES",
    "OUTPUT_TOOL_NAME",
    "OutputMode",
    "OutputRequest",
    "OutputRun",
    "OutputSpec",
    "batch_output_response",
    "is_refusal",
    "output_json",
    "output_run",
]

OutputMode = Literal["tool", "native", "grammar"]
OUTPUT_MODES: tuple[str, ...] = ("tool", "native", "grammar")
OUTPUT_TOOL_NAME = "final_answer"
WRAP_KEY = "value"
ACCEPTED = "Final answer received."
# How every refusal the loop sends back as a user message begins (a recording tells them so).
REFUSALS = (
    "The output does not match its schema",
    "The output could not be read as",
    "The output was refused",
    "The answer is not JSON",
)
_DESCRIPTION = (
    "Give the final answer. Call this once you have everything the answer needs; its arguments "
    "are the answer, and they must match its schema."
)
_FENCE = "```"


def _identity(value: Any) -> Any:
    return value


def _check_mode(_inst: Any, _attr: Any, value: Any) -> None:
    if value not in OUTPUT_MODES:
        raise ValueError(f"output_mode must be one of {', '.join(map(repr, OUTPUT_MODES))}, got {value!r}")


def _check_retries(_inst: Any, _attr: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"output_retries must be an int >= 0, got {value!r}")


def _check_callable(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{attr.name} must be callable, got {type(value).__name__}")


def _is_object_schema(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "object"


@attrs.frozen(kw_only=True)
class OutputSpec:
    """How a run's output is asked for and checked (see the module docstring). Built once per
    agent setting or per prompt; an invalid schema raises ``ValueError`` here, naming it."""

    schema: dict[str, Any]
    mode: str = attrs.field(default="tool", validator=_check_mode)
    retries: int = attrs.field(default=2, validator=_check_retries)
    convert: Callable[[Any], Any] = attrs.field(default=_identity, validator=_check_callable)
    validate: Callable[[Any], Any] | None = attrs.field(default=None, validator=_check_callable)
    name: str = OUTPUT_TOOL_NAME
    type_name: str = "dict"
    wrapped: bool = attrs.field(init=False)
    wire_schema: dict[str, Any] = attrs.field(init=False)
    tool: AgentTool = attrs.field(init=False, repr=False)
    request: OutputRequest = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.schema, Mapping):
            raise TypeError(f"output_schema must be a JSON Schema (a dict), got {type(self.schema).__name__}")
        schema = dict(self.schema)
        try:
            compile_schema_validator(None, schema)
        except ValueError as exc:  # its text names the tool's input_schema: say which schema
            raise ValueError(str(exc).replace("input_schema", "output_schema", 1)) from None
        wrapped = not _is_object_schema(schema)
        wire = _wrapped(schema) if wrapped else schema
        object.__setattr__(self, "schema", schema)
        object.__setattr__(self, "wrapped", wrapped)
        object.__setattr__(self, "wire_schema", wire)
        try:
            tool = AgentTool(self.name, "Final answer", _DESCRIPTION, wire, self._execute)
        except ValueError as exc:  # the wire form's refusal would name the output tool's input
            raise ValueError(f"output_schema cannot be offered to the model: {exc}") from None
        object.__setattr__(self, "tool", tool)
        object.__setattr__(self, "request", OutputRequest(self.name, wire, self.mode))

    # -- checking --------------------------------------------------------------------------

    def accept(self, data: Any) -> tuple[bool, Any]:
        """``(True, value)`` for a candidate (the model's JSON, in its wire form) that matches
        the schema, converts and passes ``validate``; else ``(False, problem)``, the text that
        goes back to the model. Never raises."""
        problem = (
            None if _certainly_valid(self.tool, data) else schema_violations(data, self.wire_schema, "output")
        )
        if problem is not None:
            return False, (
                f"The output does not match its schema:\n{problem}\n\nReceived:\n{format_arguments(data)}"
            )
        return self.finish(data)

    def finish(self, data: Any) -> tuple[bool, Any]:
        """``accept`` after the schema check: unwrap, convert and run ``validate``."""
        raw = data[WRAP_KEY] if self.wrapped and isinstance(data, Mapping) else data
        try:
            value = self.convert(raw)
        except Exception as exc:
            problem = clip(describe_error(exc), 600)
            return False, f"The output could not be read as {self.type_name}: {problem}"
        if self.validate is None:
            return True, value
        try:
            verdict = self.validate(value)
        except Exception as exc:
            reason = str(exc) if isinstance(exc, OutputRejected) else describe_error(exc)
            return False, f"The output was refused: {clip(reason, 2000)}"
        if verdict is None or verdict is True:
            return True, value
        reason = verdict if isinstance(verdict, str) and verdict else "validate_output refused it"
        return False, f"The output was refused: {clip(reason, 2000)}"

    def accept_text(self, text: str) -> tuple[bool, Any]:
        """``accept`` for a reply's text: JSON (a fenced block is unfenced), then checked."""
        body = _unfenced(text.strip())
        try:
            data = json.loads(body, parse_constant=_refuse_constant)
        except (ValueError, RecursionError):
            return False, "The answer is not JSON."
        if not (self.wrapped and isinstance(data, dict) and set(data) == {WRAP_KEY}):
            data = self.wrap(data)
        return self.accept(data)

    def wrap(self, data: Any) -> Any:
        """A JSON value of the output's schema in the wire form the model fills."""
        return {WRAP_KEY: data} if self.wrapped else data

    def how_to_answer(self) -> str:
        """What the model is asked to do after a refused answer, in this mode."""
        if self.mode == "tool":
            return (
                f"give the final answer by calling the {self.name} tool with arguments that match its schema."
            )
        return "answer with only a JSON value that matches the schema, no other text."

    def retry_text(self, problem: str) -> str:
        """The user message that sends a refused output back to the model."""
        return f"{problem}\n\nPlease {self.how_to_answer()}"

    # -- the output tool -------------------------------------------------------------------

    def _execute(self, _call_id: str, args: dict[str, Any], _signal: Any = None, _update: Any = None) -> Any:
        """The output tool: its arguments were checked against the schema by the pipeline;
        convert and validate them, and return them as the run's output."""
        ok, value = self.finish(args)
        if not ok:
            raise OutputRejected(value)
        return AgentToolResult([TextContent(ACCEPTED)], output=value)


def _certainly_valid(tool: AgentTool, data: Any) -> bool:
    """Whether the output tool's fast check (the one tool calls get) says ``data`` is valid:
    it answers only for simple schemas and only when sure, and is many times quicker than
    ``jsonschema`` on a large output."""
    check = tool.fast_check
    try:
        return check is not None and check(data)
    except RecursionError:  # nested past the fast check's reach: jsonschema decides
        return False


def _unfenced(body: str) -> str:
    """The content of a fenced block (```` ```json ````, a line break, the content, a line
    break, ```` ``` ````) that is the whole of ``body``, stripped; else ``body`` itself. One
    pass over the text: a regular expression for this backtracked in quadratic time on a fence
    followed by many line breaks, holding the GIL for minutes."""
    if not (body.startswith(_FENCE) and body.endswith("\n" + _FENCE)):
        return body
    start = len(_FENCE)
    while start < len(body) and body[start].isascii() and body[start].isalpha():
        start += 1  # the language tag
    blank = start
    while blank < len(body) and body[blank].isspace():
        blank += 1
    closing = len(body) - len(_FENCE) - 1  # the line break before the closing fence
    opening = body.rfind("\n", start, min(blank, closing))
    if opening == -1:
        return body
    return body[opening + 1 : closing].strip()


_DEFINITIONS = ("$defs", "definitions")
_ROOT_ONLY = ("$schema", "$vocabulary")


def _wrapped(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The object the model fills for a schema of another type: ``{"value": <schema>}``. The
    schema's definitions move to the wrapper's root, where ``#/$defs/...`` references (pydantic's
    ``TypeAdapter(list[Model])`` writes them) still find them, and every other reference into
    the schema's root (``#``, ``#/items``) is pointed at ``#/properties/value`` where the schema
    now sits. A schema with its own ``$id`` is a resource of its own and is left as it is."""
    inner = dict(schema)
    outer: dict[str, Any] = {
        "type": "object",
        "properties": {WRAP_KEY: inner},
        "required": [WRAP_KEY],
        "additionalProperties": False,
    }
    if "$id" in inner:
        return outer
    for key in (*_DEFINITIONS, *_ROOT_ONLY):
        if key in inner:
            outer[key] = inner.pop(key)
    outer["properties"] = {WRAP_KEY: _point_into_value(inner)}
    for key in _DEFINITIONS:
        if isinstance(outer.get(key), Mapping):
            outer[key] = _point_into_value(outer[key])
    return outer


def _point_into_value(schema: Any) -> Any:
    """A copy of ``schema`` whose references into the old root (other than its definitions)
    point under ``#/properties/value``. Subschemas with their own ``$id`` keep theirs: their
    references resolve against that. Iterative, so a deep schema cannot exhaust the stack."""
    top: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(schema, top, 0)]
    while stack:
        node, parent, key = stack.pop()
        if isinstance(node, Mapping):
            copy: Any = dict(node)
            if "$id" not in node or node is schema:
                for name, value in node.items():
                    if name == "$ref" and isinstance(value, str):
                        copy[name] = _moved_ref(value)
                    else:
                        stack.append((value, copy, name))
        elif isinstance(node, list):
            copy = list(node)
            stack.extend((value, copy, n) for n, value in enumerate(node))
        else:
            copy = node
        parent[key] = copy
    return top[0]


def _moved_ref(ref: str) -> str:
    """``ref`` as seen from the wrapper: the definitions stay at the root, the rest of the old
    root is under ``#/properties/value``."""
    if ref != "#" and not ref.startswith("#/"):
        return ref  # another document, or an anchor (found anywhere in the resource)
    if any(ref == f"#/{d}" or ref.startswith(f"#/{d}/") for d in _DEFINITIONS):
        return ref
    return f"#/properties/{WRAP_KEY}{ref[1:]}"


def is_refusal(text: str) -> bool:
    """Whether ``text`` is a refused output the loop sent back to the model as a user message."""
    return text.startswith(REFUSALS)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class OutputRun(RunFeature):
    """A run's output, at the loop's points: the schema is put on each request
    (``FormatOutputRun``) or the output tool offered (``ToolOutputRun``), and after each
    reply the run ends in the output that fits, or the problem goes back to the model until
    ``retries`` refusals are spent (then the run ends in an error)."""

    __slots__ = ("failures", "spec")

    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec
        self.failures = 0  # outputs refused so far

    def verdict(
        self, run: RunView, reply: AssistantMessage, batch: AgentToolCallBatch
    ) -> AssistantMessage | None:
        if batch.output is not None:
            return batch_output_response(run, reply, batch, self.spec)
        for msg in batch.messages:
            if msg.tool_name == self.spec.name and msg.is_error:
                ended = self.refused(run, content_text(msg.content))
                if ended is not None:
                    return ended
        return None

    def answer(self, run: RunView, reply: AssistantMessage) -> AssistantMessage | None:
        """A reply without tool calls: its text as the output when it is JSON that fits; else
        the problem goes back to the model as a user message (``None``: the run goes on) until
        the retries are spent. A failed or aborted reply ends the run as it is."""
        if reply.stop_reason in ("error", "aborted"):
            return reply
        ok, value = self.spec.accept_text(content_text(reply.content))
        if ok:
            return attrs.evolve(reply, output=value)
        ended = self.refused(run, value)
        if ended is None:
            run.add(UserMessage([TextContent(self.spec.retry_text(value))], run.config.clock()))
        return ended

    def refused(self, run: RunView, problem: str) -> AssistantMessage | None:
        """Count a refused output; the run's error response once the retries are spent, else
        ``None`` (the run goes on, the problem already before the model)."""
        self.failures += 1
        if self.failures <= self.spec.retries:
            return None
        return run.made_up(
            "error",
            f"No valid output after {self.failures} attempts (output_retries={self.spec.retries}); "
            f"the last one: {problem}",
        )


class ToolOutputRun(OutputRun):
    """``OutputRun`` in the ``tool`` mode: the output tool is offered beside the agent's tools
    (to the model and to batches), and a run whose agent has a tool of its name ends at once
    in an error."""

    __slots__ = ("with_tool",)

    def __init__(self, spec: OutputSpec) -> None:
        super().__init__(spec)
        # The state's tools with the output tool, rebuilt when the state's mapping is replaced.
        self.with_tool: tuple[Any, dict[str, Any]] | None = None

    def start(self, run: RunView) -> AssistantMessage | None:
        name = self.spec.name
        if name not in run.state.tools:
            return None
        return run.made_up(
            "error",
            f'A tool of the agent is named "{name}", the name of the output tool; '
            "rename that tool, or use another output_mode",
        )

    def prepare(self, run: RunView, context: AgentContext) -> AgentContext:
        if not isinstance(context, AgentContext):  # a custom prepare_context's own kind
            return context  # type: ignore[unreachable]
        tools = {**context.tools, self.spec.name: self.spec.tool}
        return AgentContext(context.system_prompt, context.messages, tools)

    def tools(self, run: RunView, tools: Any) -> Any:
        cached = self.with_tool
        if cached is None or cached[0] is not tools:
            cached = self.with_tool = (tools, {**tools, self.spec.name: self.spec.tool})
        return cached[1]


class FormatOutputRun(OutputRun):
    """``OutputRun`` in the ``native`` and ``grammar`` modes: the schema goes on each request."""

    __slots__ = ()

    def request(self, run: RunView, request: Any) -> None:
        # As ``LlmRequest.output`` (its spec view shows it as ``response_format``), or as a
        # ``response_format`` key of a request dict a custom ``format_msg_for_llm`` made.
        if isinstance(request, LlmRequest):
            request.output = self.spec.request
        elif isinstance(request, dict):
            request.setdefault("response_format", response_format_view(self.spec.request))


def output_run(spec: OutputSpec) -> OutputRun:
    """The run-time object of a run with the output ``spec``."""
    return ToolOutputRun(spec) if spec.mode == "tool" else FormatOutputRun(spec)


def batch_output_response(
    run: RunView, reply: AssistantMessage, batch: AgentToolCallBatch, spec: OutputSpec | None
) -> AssistantMessage:
    """The run's response for a batch that gave an output (``batch.output``: from the output
    tool, or a tool's own ``output``, which is checked against ``spec`` when the run has one):
    the output as JSON text with the reply's provider fields and usage, or the terminated
    batch's response with the output; an error response when a tool's output does not fit."""
    assert batch.output is not None
    call_id, value = batch.output
    tool_name = next((m.tool_name for m in batch.messages if m.tool_call_id == call_id), "")
    if spec is not None and tool_name != spec.name:
        ok, value = spec.accept(spec.wrap(output_json(value)))
        if not ok:
            return run.made_up("error", f'Tool "{tool_name}" gave an output that does not fit: {value}')
    if batch.terminate:
        return attrs.evolve(build_terminated_response(batch, reply, run.config.clock()), output=value)
    return AssistantMessage(
        content=[TextContent(json.dumps(output_json(value), ensure_ascii=False))],
        api=reply.api,
        provider=reply.provider,
        model=reply.model,
        usage=reply.usage,
        stop_reason="stop",
        timestamp=run.config.clock(),
        output=value,
    )
