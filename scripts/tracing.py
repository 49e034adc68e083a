"""Tracing: every run, LLM call and tool call of an agent as an OpenTelemetry span.

``trace_agent(agent, tracer)`` (or ``enable_tracing()`` for every agent made afterwards) subscribes a
listener that turns the loop's events into spans following the OpenTelemetry GenAI conventions:
an ``invoke_agent`` span per run, with a ``chat`` span per LLM call and an ``execute_tool`` span
per tool call under it, carrying ``gen_ai.*`` attributes (model, token usage, tool name and call
id) and errors as span status. This script collects the spans in memory and prints the tree; in
a service you would export them to your collector instead (an OTLP exporter). It needs the
``otel`` extra and the OpenTelemetry SDK. The model is scripted (see ``_scripted.py``).
"""

from __future__ import annotations

from typing import Any

from _scripted import ScriptedModel, answer, calls, use
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from yiemagent import ToolOptions, YiemAgent, function_tool
from yiemagent.integrations import trace_agent


@function_tool(parallel=True)
def population(city: str) -> str:
    """How many people live in a city.

    Args:
        city: The city's name.
    """
    return {"Paris": "2.1 million", "Tokyo": "14 million"}.get(city, "unknown")


def print_tree(spans: tuple[ReadableSpan, ...]) -> None:
    """Print each span under its parent, with its gen_ai attributes and status."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)

    def show(span: ReadableSpan, depth: int) -> None:
        attributes = {
            k: v
            for k, v in (span.attributes or {}).items()
            if k.startswith("gen_ai.") and k != "gen_ai.operation.name"
        }
        status = span.status.status_code.name
        print(f"{'  ' * depth}{span.name}  [{status}] {attributes}")
        for child in children.get(span.context.span_id, []):
            show(child, depth + 1)

    for root in children.get(None, []):
        show(root, 0)


def traced(agent: YiemAgent, tracer: Any) -> YiemAgent:
    """``agent``, traced with ``tracer``."""
    trace_agent(agent, tracer)
    return agent


def main() -> None:
    """Run one question with two parallel tool calls and print the span tree."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel(
        [
            calls(use("population", city="Paris"), use("population", city="Tokyo")),
            "Tokyo has far more people than Paris: 14 million against 2.1 million.",
        ],
        name="scripted-model",
    )
    with traced(
        YiemAgent(
            llm_call=model,
            tools=[population],
            tool_options=ToolOptions(execution="parallel"),
            name="demographer",
            session_id="conversation-1",
        ),
        provider.get_tracer("example"),
    ) as agent:
        reply = agent.prompt("Which city is bigger, Paris or Tokyo?", timeout=30)
    print("answer:", answer(reply))
    print_tree(exporter.get_finished_spans())


if __name__ == "__main__":
    main()
