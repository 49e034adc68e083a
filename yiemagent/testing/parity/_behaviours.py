"""The scenario vocabulary made real: tools, hooks and a scripted model built from a scenario's
behaviours, plus the ``Harness`` their steps act on (named latches and named points).

Every behaviour is a few lines here on purpose: a port implements the same vocabulary in its own
language (docs/PARITY.md lists it), so nothing here may depend on a Python-only trick. Waits are
bounded: a latch that is never released, or an abort that never comes, is recorded as a harness
problem (the scenario fails, saying which) instead of hanging the suite.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from yiemagent.core._content import AgentToolCall, ContentBlock, TextContent
from yiemagent.core._context import prepare_context as default_prepare_context
from yiemagent.core._messages import AssistantMessage, LlmUsage, UserMessage
from yiemagent.core._request import LlmRequest
from yiemagent.core._tool_calls import parse_arguments
from yiemagent.core._tools import (
    AbortSignal,
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentState,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
)
from yiemagent.errors import HarnessError, LlmAbortedError
from yiemagent.tools._store import ToolStore, list_tool, register_tool

from ._normalise import USAGE_FIELDS, canonical_json
from ._tool_files import CodePlaceholders

__all__ = [
    "Harness",
    "HarnessError",
    "ScriptedModel",
    "build_format_msg_for_llm",
    "build_hooks",
    "build_prepare_context",
    "build_tools",
    "other_store",
]

WAIT_S = 10.0  # how long any harness wait may last before the scenario fails


class Harness:
    """Named latches and named points shared by a scenario's behaviours and its driver.

    ``reach(point)`` runs the actions registered for ``point`` (inputs with ``"at"``) right
    there, on the thread that reached it, in the order the scenario lists them; each fires once.
    """

    def __init__(self, wait_s: float = WAIT_S) -> None:
        self.wait_s = wait_s
        self.problems: list[str] = []
        self._latches: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._points: dict[str, list[Callable[[], None]]] = {}

    def latch(self, name: str) -> threading.Event:
        with self._lock:
            return self._latches.setdefault(name, threading.Event())

    def release(self, name: str) -> None:
        self.latch(name).set()

    def wait(self, name: str) -> None:
        if not self.latch(name).wait(self.wait_s):
            self.fail(f"latch {name!r} was not released within {self.wait_s:g} s")

    def fail(self, problem: str) -> None:
        """Record a harness problem and raise ``HarnessError`` to stop the behaviour."""
        with self._lock:
            self.problems.append(problem)
        raise HarnessError(problem)

    def at_point(self, name: str, action: Callable[[], None]) -> None:
        """Run ``action`` when a step reaches point ``name``."""
        with self._lock:
            self._points.setdefault(name, []).append(action)

    def reach(self, name: str) -> None:
        with self._lock:
            actions = self._points.pop(name, [])
        for action in actions:
            action()

    def pending_points(self) -> list[str]:
        """Named points with actions that never ran."""
        with self._lock:
            return sorted(self._points)

    def run_steps(
        self,
        steps: Sequence[Mapping[str, Any]],
        signal: AbortSignal | None,
        on_partial: Callable[[Any], None] | None = None,
    ) -> None:
        """Perform ``steps`` in order (``partial`` needs ``on_partial``)."""
        for step in steps:
            action = step["do"]
            if action == "partial":
                if on_partial is not None:
                    on_partial(AgentToolResult([TextContent(step["text"])]))
            elif action == "wait":
                self.wait(step["latch"])
            elif action == "release":
                self.release(step["latch"])
            elif action == "reach":
                self.reach(step["point"])
            elif action == "wait_abort" and (signal is None or not signal.wait(self.wait_s)):
                self.fail(f"the abort a step waits for did not come within {self.wait_s:g} s")


class ToolFailure(Exception):
    """What a tool, hook or model of the vocabulary raises for ``"fail"``."""


def _tool(spec: Mapping[str, Any], harness: Harness, register: Callable[[Sequence[str]], None]) -> AgentTool:
    steps = list(spec.get("steps", []))
    outcome = dict(spec["outcome"])

    def execute(
        _call_id: str, args: dict[str, Any], signal: AbortSignal | None, on_partial: Callable[[Any], None]
    ) -> Any:
        harness.run_steps(steps, signal, on_partial)
        if "fail" in outcome:
            raise ToolFailure(outcome["fail"])
        if outcome.get("invalid_result"):
            return "not a tool result"
        text = canonical_json(args) if outcome.get("echo") else outcome["text"]
        details = dict(outcome.get("details", {}))
        if outcome.get("register"):
            register(outcome["register"])
            details["addedToolNames"] = list(outcome["register"])
        return AgentToolResult(
            [TextContent(text)],
            details,
            terminate=bool(outcome.get("terminate")),
            output=outcome.get("output"),
        )

    return AgentTool(
        spec["name"],
        spec.get("label", spec["name"]),
        spec.get("description", ""),
        dict(spec.get("input_schema", {"type": "object"})),
        execute,
        prepare_arguments=_prepare(spec.get("prepare")),
        validate_required_args=_validate(spec.get("validate")),
        parallel_tool_execute=bool(spec.get("parallel", False)),
        timeout_s=spec.get("timeout_s"),
        needs_approval=bool(spec.get("needs_approval", False)),
        max_tool_result_chars=spec.get("max_result_chars"),
        untrusted_schema=True,  # a scenario's schema comes from outside, as an MCP server's does
    )


def _prepare(spec: Mapping[str, Any] | None) -> Callable[[dict[str, Any]], Any] | None:
    if spec is None:
        return None
    if "fail" in spec:
        message = spec["fail"]

        def fail(_args: dict[str, Any]) -> Any:
            raise ToolFailure(message)

        return fail
    defaults = dict(spec["defaults"])
    return lambda args: {**defaults, **args}


def _validate(spec: Mapping[str, Any] | None) -> Callable[[dict[str, Any]], str | None] | None:
    if spec is None:
        return None
    reason = spec.get("reject")
    return lambda _args: reason


def build_tools(
    scenario_tools: Sequence[Mapping[str, Any]], harness: Harness, list_tools: bool = False
) -> tuple[list[AgentTool], ToolStore]:
    """The scenario's tools: the ones available from the start, registered in the returned
    store in the scenario's order (then ``listTools``, registered by hand, when
    ``list_tools``); ``register`` outcomes add the later ones (a later tool with the name of an
    available one replaces it in place)."""
    store = ToolStore("parity")
    later: dict[str, AgentTool] = {}

    def register(names: Sequence[str]) -> None:
        for name in names:
            register_tool(store, later[name])

    initial: list[AgentTool] = []
    for spec in scenario_tools:
        tool = _tool(spec, harness, register)
        if spec.get("available", True):
            register_tool(store, tool)
            initial.append(tool)
        else:
            later[tool.name] = tool
    if list_tools:
        initial.append(register_tool(store, list_tool(store)))
    return initial, store


def other_store(scenario_tools: Sequence[Mapping[str, Any]], harness: Harness) -> ToolStore:
    """A second store in the same process, holding ``scenario_tools`` and its own
    ``listTools``: no agent of the scenario uses it."""
    store = ToolStore("parity-other")

    def register(_names: Sequence[str]) -> None:
        return None

    for spec in scenario_tools:
        register_tool(store, _tool(spec, harness, register))
    register_tool(store, list_tool(store))
    return store


def build_prepare_context(spec: Mapping[str, Any] | None) -> Callable[[AgentState], AgentContext] | None:
    """A ``prepare_context`` that changes the default context as ``spec`` says: ``keep_last``
    (only the last N messages), ``append_user`` (a user message added at the end),
    ``system_prompt`` (another prompt), ``hide_tools`` (tools left out)."""
    if spec is None:
        return None

    def prepare(state: AgentState) -> AgentContext:
        ctx = default_prepare_context(state)
        messages = list(ctx.messages)
        if "keep_last" in spec:
            messages = messages[-int(spec["keep_last"]) :]
        if "append_user" in spec:
            messages.append(UserMessage(spec["append_user"], 0))
        hidden = set(spec.get("hide_tools", []))
        tools = {n: t for n, t in ctx.tools.items() if n not in hidden}
        return AgentContext(spec.get("system_prompt", ctx.system_prompt), messages, tools)

    return prepare


def build_format_msg_for_llm(spec: Mapping[str, Any] | None) -> Callable[[AgentContext], LlmRequest] | None:
    """A ``format_msg_for_llm`` that makes the default request, but with no tools
    (``no_tools``) or another system prompt (``system_prompt``)."""
    if spec is None:
        return None

    def format_request(ctx: AgentContext) -> LlmRequest:
        tools = {} if spec.get("no_tools") else ctx.tools
        return LlmRequest(spec.get("system_prompt", ctx.system_prompt), ctx.messages, tools, context=ctx)

    return format_request


def _first_rule(rules: Sequence[Mapping[str, Any]], call: AgentToolCall) -> Mapping[str, Any] | None:
    for rule in rules:
        match = rule.get("match", {})
        if match.get("tool", call.name) == call.name and match.get("tool_call_id", call.id) == call.id:
            return rule
    return None


def build_hooks(
    hooks: Mapping[str, Sequence[Mapping[str, Any]]],
    harness: Harness,
    observe: Callable[[str, Any], None] | None = None,
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(before_tool_call, after_tool_call)`` from the scenario's hook rules. Both hooks are
    always installed (a hook without a matching rule returns nothing, which changes nothing), so
    ``observe(kind, ctx)`` sees what every hook call receives, before its rule acts."""
    before_rules, after_rules = list(hooks.get("before", [])), list(hooks.get("after", []))

    def before(ctx: BeforeToolCallContext, signal: AbortSignal | None) -> Any:
        if observe is not None:
            observe("before", ctx)
        rule = _first_rule(before_rules, ctx.tool_call)
        if rule is None:
            return None
        harness.run_steps(rule.get("steps", []), signal)
        if "fail" in rule:
            raise ToolFailure(rule["fail"])
        as_object = rule.get("form") == "object"
        if "block" in rule:
            reason = rule["block"] if isinstance(rule["block"], str) else None
            return (
                BeforeToolCallResult(True, reason)
                if as_object
                else ({"block": True, "reason": reason} if reason is not None else {"block": True})
            )
        if rule.get("allow"):
            return BeforeToolCallResult(False) if as_object else {"block": False}
        return None

    def after(ctx: AfterToolCallContext, signal: AbortSignal | None) -> Any:
        if observe is not None:
            observe("after", ctx)
        rule = _first_rule(after_rules, ctx.tool_call)
        if rule is None:
            return None
        harness.run_steps(rule.get("steps", []), signal)
        if "fail" in rule:
            raise ToolFailure(rule["fail"])
        override = dict(rule.get("override", {}))
        if not override:
            return None
        if "content" in override:
            override["content"] = [TextContent(override["content"])]
        return AfterToolCallResult(**override) if rule.get("form") == "object" else override

    return before, after


def _arguments_for_dict_forms(raw: str) -> Any:
    """Arguments as the spec's dict forms carry them: the parsed object, or the text itself
    when it is not a JSON object (so the pipeline can say what was wrong)."""
    parsed = parse_arguments(raw)
    return parsed if isinstance(parsed, dict) else raw


# The vocabulary's finish reasons (the scenario format's words, borrowed from OpenAI's) and the
# stop reason each stands for; a reply with tool calls that says "stop" is "toolUse", as from
# servers that send it so. Kept here: the suite never reads a provider's parser.
_STOP_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
    "content_filter": "error",
}


def _stop_reason(reason: Any, has_tool_calls: bool) -> str:
    mapped = _STOP_REASONS.get(reason, "stop") if isinstance(reason, str) else "stop"
    return "toolUse" if has_tool_calls and mapped == "stop" else mapped


def reply_message(reply: Mapping[str, Any], codes: CodePlaceholders | None = None) -> AssistantMessage:
    """The ``AssistantMessage`` a provider client would make of a scripted OpenAI reply, with
    its tool calls in the form the reply asks for (docs/design.md, decision 2); ``codes`` turns
    writeTool's code placeholders into code first."""
    message = reply["message"]
    wire = list(message.get("tool_calls", []))
    if codes is not None:
        wire = [
            dict(
                c, function=dict(c["function"], arguments=codes.expand_arguments(c["function"]["arguments"]))
            )
            for c in wire
        ]
    stop = _stop_reason(reply.get("finish_reason", "tool_calls" if wire else "stop"), bool(wire))
    content: list[ContentBlock] = [TextContent(message["content"])] if message.get("content") else []
    form = reply.get("form", "typed")
    if form == "typed":  # as the OpenAI client parses it; a missing id is left to the loop
        content += [
            AgentToolCall(c.get("id", ""), c["function"]["name"], parse_arguments(c["function"]["arguments"]))
            for c in wire
        ]
    elif form == "wire":
        content += [dict(c, function=dict(c["function"])) for c in wire]
    else:
        flat = [
            {
                **({"id": c["id"]} if "id" in c else {}),
                "name": c["function"]["name"],
                "arguments": _arguments_for_dict_forms(c["function"]["arguments"]),
            }
            for c in wire
        ]
        if form == "tool_calls":
            content.append({"type": "tool_calls", "tool_calls": flat})
        else:
            content += [{"type": "tool_call", **c} for c in flat]
    usage = reply.get("usage")
    return AssistantMessage(
        content,
        api="openai-completions",
        provider="parity",
        model="scripted",
        stop_reason=stop,
        usage=None if usage is None else LlmUsage(**{k: int(usage.get(k, 0)) for k in USAGE_FIELDS}),
    )


class ScriptedModel:
    """An ``llm_call`` that answers with the scenario's replies, one per call, in order.

    Before answering it performs the reply's steps; if the run was aborted by then it gives up
    as a real client does (``LlmAbortedError``). A call past the last reply fails, which shows
    up in the trace as an error response.
    """

    def __init__(
        self,
        replies: Sequence[Mapping[str, Any]],
        harness: Harness,
        observe: Callable[[Any], None] | None = None,
        codes: CodePlaceholders | None = None,
    ) -> None:
        self.replies = list(replies)
        self.codes = codes
        self.harness = harness
        self.observe = observe
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, request: Any, signal: AbortSignal | None = None) -> AssistantMessage:
        if self.observe is not None:
            self.observe(request)
        with self._lock:
            index, self.calls = self.calls, self.calls + 1
        if signal is not None and signal.aborted:  # a real client gives up before anything else
            raise LlmAbortedError("the model call was aborted")
        if index >= len(self.replies):
            raise ToolFailure(f"the script has no reply for model call {index + 1}")
        reply = self.replies[index]
        self.harness.run_steps(reply.get("steps", []), signal)
        if signal is not None and signal.aborted:
            raise LlmAbortedError("the model call was aborted")
        if "fail" in reply:
            raise ToolFailure(reply["fail"])
        return reply_message(reply, self.codes)
