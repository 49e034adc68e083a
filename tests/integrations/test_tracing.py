"""OpenTelemetry spans of runs, LLM calls and tool calls, checked with the SDK's in-memory
exporter: the span tree with parallel tools, an error, an abort, and content only on request."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from agent_helpers import WAIT, ScriptedLLM, call, echo_tool, gated_tool, reply
from llm_helpers import fast, openai_client, openai_completion, openai_tool_call
from llm_server import ScriptedServer
from tiers import absent

pytest.importorskip("opentelemetry.sdk", reason=absent("otel"))
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from yiemagent import (
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    Approve,
    AssistantMessage,
    LlmUsage,
    TextContent,
    YiemAgent,
)
from yiemagent.integrations._tracing import disable_tracing, enable_tracing, trace_agent


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    yield memory
    memory.clear()


def traced(agent: YiemAgent, tracer: Any) -> YiemAgent:
    """``agent``, traced with ``tracer`` (tracing attaches to an agent from outside)."""
    trace_agent(agent, tracer)
    return agent


def tracer_for(exporter: InMemorySpanExporter) -> Any:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test")


def tree(spans: tuple[ReadableSpan, ...]) -> dict[str, list[str]]:
    """Span name -> names of its children, for spans whose parent is in the set."""
    by_id = {s.context.span_id: s for s in spans}
    children: dict[str, list[str]] = {s.name: [] for s in spans}
    for span in spans:
        if span.parent is not None and span.parent.span_id in by_id:
            children[by_id[span.parent.span_id].name].append(span.name)
    return {name: sorted(kids) for name, kids in children.items()}


def test_a_run_with_parallel_tools_is_one_tree_with_gen_ai_attributes(exporter: InMemorySpanExporter) -> None:
    batch = AssistantMessage(
        [AgentToolCall(f"c{i}", "echo", {"text": str(i)}) for i in range(3)],
        model="m-1",
        provider="test",
        usage=LlmUsage(input=11, output=7),
        stop_reason="toolUse",
    )
    llm = ScriptedLLM(batch, AssistantMessage([TextContent("done")], model="m-1", provider="test"))
    with traced(
        YiemAgent(
            llm_call=llm,
            tools=[echo_tool(parallel=True)],
            tool_execution="parallel",
            name="helper",
            model="m-1",
            session_id="conv-1",
        ),
        tracer_for(exporter),
    ) as agent:
        agent.prompt("go", WAIT)
    spans = exporter.get_finished_spans()
    assert tree(spans)["invoke_agent helper"] == [
        "chat m-1",
        "chat m-1",
        "execute_tool echo",
        "execute_tool echo",
        "execute_tool echo",
    ]
    assert len({s.context.trace_id for s in spans}) == 1
    run = next(s for s in spans if s.name == "invoke_agent helper")
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.conversation.id"] == "conv-1"
    first_chat = next(s for s in spans if s.name == "chat m-1")
    assert first_chat.attributes["gen_ai.request.model"] == "m-1"
    assert first_chat.attributes["gen_ai.usage.input_tokens"] == 11
    assert first_chat.attributes["gen_ai.usage.output_tokens"] == 7
    assert first_chat.attributes["gen_ai.provider.name"] == "test"
    assert tuple(first_chat.attributes["gen_ai.response.finish_reasons"]) == ("toolUse",)
    tools = [s for s in spans if s.name == "execute_tool echo"]
    assert sorted(s.attributes["gen_ai.tool.call.id"] for s in tools) == ["c0", "c1", "c2"]
    assert all(s.attributes["gen_ai.tool.name"] == "echo" for s in tools)
    assert all("gen_ai.tool.call.arguments" not in s.attributes for s in tools)  # content is opt-in
    assert all(s.status.status_code is not StatusCode.ERROR for s in spans)


def test_errors_are_recorded_on_the_failing_span_and_the_run(exporter: InMemorySpanExporter) -> None:
    def model_down(_request: dict[str, Any]) -> AssistantMessage:
        raise ConnectionError("model down")

    llm = ScriptedLLM(call("missing", {}), default=model_down)
    with traced(YiemAgent(llm_call=llm, tools=[echo_tool()]), tracer_for(exporter)) as agent:
        assert agent.prompt("go", WAIT).stop_reason == "error"
    spans = exporter.get_finished_spans()
    tool = next(s for s in spans if s.name.startswith("execute_tool"))
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes["error.type"] == "tool_not_found"  # the pipeline's stable error kind
    chats = [s for s in spans if s.name.startswith("chat")]
    assert chats[-1].status.status_code is StatusCode.ERROR
    # Content is not recorded: the status names the step and the exception's type, not its text.
    assert chats[-1].status.description == "error: llm_call failed (ConnectionError)"
    run = next(s for s in spans if s.name.startswith("invoke_agent"))
    assert run.status.status_code is StatusCode.ERROR and run.attributes["error.type"] == "error"


def test_an_aborted_run_ends_every_span_it_opened(exporter: InMemorySpanExporter) -> None:
    started, release = threading.Event(), threading.Event()
    with traced(
        YiemAgent(
            llm_call=ScriptedLLM(call("slow", {}), reply("never")), tools=[gated_tool(started, release)]
        ),
        tracer_for(exporter),
    ) as agent:
        agent.run_agent("go")
        assert started.wait(WAIT)
        agent.abort()
        assert agent.take_response(WAIT).stop_reason == "aborted"
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == ["chat", "execute_tool slow", "invoke_agent yiemagent"]
    run = next(s for s in spans if s.name.startswith("invoke_agent"))
    assert run.attributes["error.type"] == "aborted"
    assert all(s.end_time is not None for s in spans)


def test_content_is_recorded_only_when_asked(exporter: InMemorySpanExporter) -> None:
    enable_tracing(tracer_for(exporter), record_content=True)
    try:
        llm = ScriptedLLM(call("echo", {"text": "secret plan"}), reply("ok"))
        with YiemAgent(llm_call=llm, tools=[echo_tool()]) as agent:
            agent.prompt("go", WAIT)
    finally:
        disable_tracing()
    tool = next(s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool"))
    assert "secret plan" in tool.attributes["gen_ai.tool.call.arguments"]
    assert tool.attributes["gen_ai.tool.call.result"] == "echo: secret plan"
    exporter.clear()
    with YiemAgent(llm_call=ScriptedLLM(reply("ok"))) as agent:  # tracing is off again
        agent.prompt("go", WAIT)
    assert exporter.get_finished_spans() == ()


def test_spans_made_inside_llm_call_nest_under_the_chat_span(exporter: InMemorySpanExporter) -> None:
    tracer = tracer_for(exporter)

    def llm(request: dict[str, Any]) -> AssistantMessage:
        with tracer.start_as_current_span("http POST"):
            return reply("ok")

    with traced(YiemAgent(llm_call=llm), tracer) as agent:
        agent.prompt("go", WAIT)
    assert tree(exporter.get_finished_spans())["chat"] == ["http POST"]


def test_importing_yiemagent_imports_no_opentelemetry() -> None:
    code = "import sys, yiemagent; sys.exit(any(m.startswith('opentelemetry') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


MARKER = "PLAN-7731-CONFIDENTIAL"  # content that no span may hold unless content is recorded


def span_texts(span: ReadableSpan) -> list[str]:
    """Every text a span exports: its name, status description, attribute values (sequences
    too), and each event's and link's name and attributes."""

    def values(attributes: Any) -> list[str]:
        out: list[str] = []
        for key, value in (attributes or {}).items():
            items = value if isinstance(value, (list, tuple)) else [value]
            out += [str(key), *(str(item) for item in items)]
        return out

    texts = [span.name, span.status.description or "", *values(span.attributes)]
    for event in span.events:
        texts += [event.name, *values(event.attributes)]
    for link in span.links:
        texts += values(link.attributes)
    return texts


def leaky_run(server: ScriptedServer, tracer: Any = None) -> None:
    """Two runs through the OpenAI client on the loopback server whose every failure quotes
    ``MARKER``: tool calls that break the schema, are not JSON, and raise an exception quoting
    their arguments, then a provider error (HTTP 400) quoting the prompt; and a refusal that
    quotes it. ``tracer`` ``None`` traces with the ``enable_tracing`` default."""
    lookup = AgentTool(
        "lookup",
        "Lookup",
        "Look a city up",
        {"type": "object", "properties": {"city": {"type": "string", "maxLength": 5}}},
        lambda _id, args, _s, _p: AgentToolResult("found"),
    )

    def fail(_id: str, args: dict[str, Any], _s: Any, _p: Any) -> AgentToolResult:
        raise ValueError(f"nothing matches {args['query']!r}")

    fetch = AgentTool(
        "fetch",
        "Fetch",
        "Fetch a page",
        {"type": "object", "properties": {"query": {"type": "string"}}},
        fail,
    )
    server.json(
        openai_completion(
            None,
            finish="tool_calls",
            tool_calls=[
                openai_tool_call("c1", "lookup", json.dumps({"city": MARKER})),
                openai_tool_call("c2", "lookup", '{"city": "' + MARKER),
                openai_tool_call("c3", "fetch", json.dumps({"query": MARKER})),
            ],
        )
    )
    server.json(
        {
            "error": {
                "type": "invalid_request_error",
                "message": f"the prompt quotes {MARKER}, which is not allowed",
            }
        },
        400,
    )
    server.json(
        {
            **openai_completion(None),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": None, "refusal": f"I won't discuss {MARKER}"},
                }
            ],
        }
    )
    with (
        openai_client(server, http=fast(max_retries=0)) as llm,
        traced(YiemAgent(llm_call=llm, tools=[lookup, fetch]), tracer) as agent,
    ):
        assert agent.prompt(f"tell me about {MARKER}", WAIT).stop_reason == "error"
        assert agent.prompt(f"and again about {MARKER}", WAIT).stop_reason == "error"


def test_without_record_content_no_span_holds_any_content(
    exporter: InMemorySpanExporter, server: ScriptedServer
) -> None:
    leaky_run(server, tracer_for(exporter))
    spans = exporter.get_finished_spans()
    assert len(spans) == 8  # 2 runs, 3 chats, 3 tool calls: every part of the run was traced
    for span in spans:
        for text in span_texts(span):
            assert MARKER not in text, f"content in span {span.name!r}: {text[:200]}"
    # The statuses still say what failed: the kind, the tool, the step and the exception type.
    statuses = sorted(s.status.description or "" for s in spans)
    assert statuses == sorted(
        [
            "schema_violation: tool lookup failed",
            "invalid_json: tool lookup failed",
            "tool_raised: tool fetch failed",
            "error: llm_call failed (LlmError)",
            "error: llm_call failed (LlmError)",
            "error",
            "error",
            "",  # the first chat, which succeeded
        ]
    )
    assert all(s.status.status_code is StatusCode.ERROR for s in spans if s.status.description)


def test_with_record_content_the_statuses_keep_the_error_texts(
    exporter: InMemorySpanExporter, server: ScriptedServer
) -> None:
    enable_tracing(tracer_for(exporter), record_content=True)
    try:
        leaky_run(server)
    finally:
        disable_tracing()
    spans = exporter.get_finished_spans()
    quoting = sorted(s.name for s in spans if MARKER in (s.status.description or ""))
    # Each failure's own text, as the search above would have found it had it been there.
    assert quoting == [
        "chat gpt-4o-mini",
        "chat gpt-4o-mini",
        "execute_tool fetch",
        "execute_tool lookup",
        "execute_tool lookup",
        "invoke_agent yiemagent",
        "invoke_agent yiemagent",
    ]


def test_a_pause_for_approval_is_an_event_of_the_run_and_no_error(exporter: InMemorySpanExporter) -> None:
    gated = attrs.evolve(echo_tool(), needs_approval=True)
    batch = AssistantMessage([AgentToolCall("c1", "echo", {"text": "secret"})], stop_reason="toolUse")
    llm = ScriptedLLM(batch, AssistantMessage([TextContent("done")]))
    with traced(YiemAgent(llm_call=llm, tools=[gated], name="helper"), tracer_for(exporter)) as agent:
        assert agent.prompt("go", WAIT).stop_reason == "awaiting_approval"
        agent.resume(approvals={"c1": Approve()})
        assert agent.take_response(timeout=WAIT).stop_reason == "stop"
    spans = exporter.get_finished_spans()
    first_run = next(s for s in spans if s.name == "invoke_agent helper")
    [event] = [e for e in first_run.events if e.name == "approval_requested"]
    assert tuple(event.attributes["yiemagent.approval.pending"]) == ("echo",)
    assert "yiemagent.approval.arguments" not in event.attributes  # content is opt-in
    waiting = next(s for s in spans if s.name == "execute_tool echo")
    assert waiting.attributes["yiemagent.approval.awaiting"] is True
    assert all(s.status.status_code is not StatusCode.ERROR for s in spans)
    assert all("secret" not in str(s.attributes) for s in spans)
