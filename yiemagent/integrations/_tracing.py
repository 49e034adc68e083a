"""OpenTelemetry spans for runs, LLM calls and tool calls, following the GenAI conventions.

Tracing is an event listener that attaches to an agent from outside: ``trace_agent(agent)``
subscribes a ``TracingListener``, which turns the loop's events into spans, and
``enable_tracing()`` does that for every agent created afterwards. The loop and the agent carry
no tracing code and cost nothing when tracing is off. Each run is an
``invoke_agent`` span; each LLM call a ``chat`` span and each tool call an ``execute_tool`` span
under it, with ``gen_ai.*`` attributes (model, provider, token usage, finish reason, tool name
and call id) and errors recorded as span status and ``error.type``. Parents are set explicitly,
so parallel tool calls on pool threads land under their run. The run span, and the chat span
while the model is called, are also the current context on the worker thread, so spans that
instrumented code makes inside ``llm_call`` (an HTTP client, say) nest under them. Message
content is recorded only with ``record_content=True``: without it no span holds a tool's
arguments or result text, the model's reply, or an error's text (which may quote any of them);
an error's status then says only its kind, the tool's name, and for a failed step of the loop
that step and the exception's type. The listener runs on the agent's worker thread, so its span
processor should not block (``BatchSpanProcessor`` exports on a thread of its own;
``SimpleSpanProcessor`` exports in the call). OpenTelemetry (the ``otel`` extra:
``opentelemetry-api``) is imported only when a listener is made.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import weakref
from collections.abc import Callable
from typing import Any, ClassVar

from yiemagent.agent._agent import YiemAgent, on_agent_created
from yiemagent.core._error_kinds import error_kind
from yiemagent.core._events import (
    AgentEndEvent,
    AgentStartEvent,
    ApprovalRequestedEvent,
    MessageEndEvent,
    MessageStartEvent,
    ToolExecEndEvent,
    ToolExecStartEvent,
)
from yiemagent.core._messages import AssistantMessage

__all__ = ["TracingListener", "default_tracing", "disable_tracing", "enable_tracing", "trace_agent"]

_default: dict[str, Any] = {}
_default_lock = threading.Lock()


def trace_agent(agent: YiemAgent, tracer: Any = None, *, record_content: bool = False) -> Callable[[], None]:
    """Trace ``agent``'s runs, LLM calls and tool calls from its next event on, with ``tracer``
    (the global tracer provider's ``yiemagent`` tracer when ``None``); return the function that
    stops it. The listener holds the agent weakly, so tracing never keeps an agent alive.
    Raises ``ImportError`` saying what to install when OpenTelemetry is missing."""
    if tracer is None:
        tracer = _otel_trace().get_tracer("yiemagent")
    ref = weakref.ref(agent)

    def conversation_id() -> str | None:
        alive = ref()
        return alive.session_id if alive is not None else None

    def request_model() -> str | None:
        alive = ref()
        model = alive.model if alive is not None else None
        return model.name if model is not None else None

    listener = TracingListener(
        tracer,
        agent_name=agent.name,
        record_content=record_content,
        conversation_id=conversation_id,
        request_model=request_model,
    )
    return agent.subscribe(listener)


def enable_tracing(tracer: Any = None, *, record_content: bool = False) -> None:
    """Trace every agent created from now on (``trace_agent`` for each): with ``tracer``, or the
    global tracer provider's ``yiemagent`` tracer when it is ``None``. Calling it again replaces
    the settings. Raises ``ImportError`` saying what to install when OpenTelemetry is missing."""
    if tracer is None:
        tracer = _otel_trace().get_tracer("yiemagent")
    with _default_lock:
        if "remove" not in _default:
            _default["remove"] = on_agent_created(_trace_new_agent)
        _default.update(tracer=tracer, record_content=record_content)


def _trace_new_agent(agent: YiemAgent) -> None:
    settings = default_tracing()
    if settings is not None:
        trace_agent(agent, settings[0], record_content=settings[1])


def disable_tracing() -> None:
    """Stop tracing agents created from now on (agents already traced keep their listener)."""
    with _default_lock:
        remove = _default.pop("remove", None)
        _default.clear()
    if remove is not None:
        remove()


def default_tracing() -> tuple[Any, bool] | None:
    """``(tracer, record_content)`` set by ``enable_tracing``, or ``None`` when it is off."""
    with _default_lock:
        return (_default["tracer"], _default["record_content"]) if "tracer" in _default else None


def _otel_trace() -> Any:
    try:
        from opentelemetry import trace
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("tracing needs OpenTelemetry: pip install 'yiemagent[otel]'") from exc
    return trace


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


# The loop's own error texts begin "<step> failed: <exception type>" (run.py and
# describe_error): the step and the type are no content; the text after them may quote some.
_STEP_FAILED = re.compile(
    r"(prepare_context|format_msg_for_llm|llm_call|the run) failed: ([A-Za-z_][A-Za-z0-9_]*)(?::|$)"
)


def _content_free_status(kind: str, message: str | None) -> str:
    """A status description for a failed run or LLM call that quotes nothing of ``message``:
    ``kind`` (the stop reason), and when ``message`` is one of the loop's own step errors, the
    step and the exception's type (``"error: llm_call failed (LlmError)"``)."""
    found = _STEP_FAILED.match(message or "")
    return f"{kind}: {found[1]} failed ({found[2]})" if found else kind


class TracingListener:
    """An event listener that makes the spans of one agent's runs (see the module docstring).

    The agent calls its listeners one at a time, so the open spans need no lock of their own.
    A span left open by a run that ended abnormally is ended with the run.
    """

    def __init__(
        self,
        tracer: Any,
        *,
        agent_name: str = "yiemagent",
        conversation_id: Callable[[], str | None] | None = None,
        request_model: Callable[[], str | None] | None = None,
        record_content: bool = False,
    ) -> None:
        trace = _otel_trace()
        from opentelemetry import context as otel_context

        self._trace = trace
        self._context = otel_context
        self._tracer = tracer
        self.agent_name = agent_name
        # Callables, read at each run: the agent's session id and model may change between runs.
        self._conversation_id = conversation_id
        self._request_model = request_model
        self.record_content = record_content
        self._run: Any = None
        self._run_token: Any = None
        self._chat: Any = None
        self._chat_token: Any = None
        self._tools: dict[str, Any] = {}
        self._model = ""

    def __call__(self, event: Any) -> None:
        handler = self._HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    # -- runs ------------------------------------------------------------------------------

    def _start_run(self, _event: AgentStartEvent) -> None:
        self._end_open("the run began before the last one ended")
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.agent_name}
        conversation = self._conversation_id() if self._conversation_id is not None else None
        self._model = (self._request_model() if self._request_model is not None else None) or ""
        if conversation:
            attributes["gen_ai.conversation.id"] = str(conversation)
        self._run = self._tracer.start_span(
            f"invoke_agent {self.agent_name}", kind=self._trace.SpanKind.INTERNAL, attributes=attributes
        )
        self._run_token = self._context.attach(self._trace.set_span_in_context(self._run))

    def _end_run(self, event: AgentEndEvent) -> None:
        run = self._run
        if run is None:
            return
        response = event.response
        if response is not None:
            run.set_attribute("gen_ai.response.finish_reasons", [response.stop_reason])
            if response.stop_reason in ("error", "aborted", "max_turns"):
                self._fail(run, response.stop_reason, self._reply_status(response))
        self._end_open("the run ended first")
        self._detach("_run_token")
        run.end()
        self._run = None

    # -- LLM calls -------------------------------------------------------------------------

    def _start_chat(self, event: MessageStartEvent) -> None:
        if event.message is not None or self._run is None:
            return  # only the model's reply starts without a message
        attributes = {"gen_ai.operation.name": "chat"}
        if self._model:
            attributes["gen_ai.request.model"] = self._model
        parent = self._trace.set_span_in_context(self._run)
        self._chat = self._tracer.start_span(
            f"chat {self._model}".strip(),
            context=parent,
            kind=self._trace.SpanKind.CLIENT,
            attributes=attributes,
        )
        self._chat_token = self._context.attach(self._trace.set_span_in_context(self._chat))

    def _end_chat(self, event: MessageEndEvent) -> None:
        chat = self._chat
        reply = event.message
        if chat is None or not isinstance(reply, AssistantMessage):
            return
        if reply.model:
            self._model = reply.model
            chat.set_attribute("gen_ai.response.model", reply.model)
            chat.update_name(f"chat {reply.model}")
        if reply.provider:
            chat.set_attribute("gen_ai.provider.name", reply.provider)
        if reply.usage is not None:
            chat.set_attribute("gen_ai.usage.input_tokens", reply.usage.input)
            chat.set_attribute("gen_ai.usage.output_tokens", reply.usage.output)
        chat.set_attribute("gen_ai.response.finish_reasons", [reply.stop_reason])
        if reply.stop_reason in ("error", "aborted"):
            self._fail(chat, reply.stop_reason, self._reply_status(reply))
        elif self.record_content:
            chat.set_attribute("gen_ai.output.messages", _json([reply.to_dict()]))
        self._detach("_chat_token")
        chat.end()
        self._chat = None

    # -- tool calls ------------------------------------------------------------------------

    def _start_tool(self, event: ToolExecStartEvent) -> None:
        if self._run is None:
            return
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.tool_name,
            "gen_ai.tool.call.id": event.tool_call_id,
            "gen_ai.tool.type": "function",
        }
        if self.record_content:
            attributes["gen_ai.tool.call.arguments"] = _json(event.arguments)
        parent = self._trace.set_span_in_context(self._run)
        self._tools[event.tool_call_id] = self._tracer.start_span(
            f"execute_tool {event.tool_name}",
            context=parent,
            kind=self._trace.SpanKind.INTERNAL,
            attributes=attributes,
        )

    def _end_tool(self, event: ToolExecEndEvent) -> None:
        span = self._tools.pop(event.tool_call_id, None)
        if span is None:
            return
        text = "".join(getattr(block, "text", "") for block in event.result.content)
        if event.is_error:  # the pipeline's stable kind when it made the error, else tool_error
            kind = error_kind(event.result.details) or "tool_error"
            # The error text often quotes the arguments (a schema violation, an exception).
            self._fail(
                span,
                kind,
                (text or "the tool call failed")
                if self.record_content
                else f"{kind}: tool {event.tool_name} failed",
            )
        if self.record_content:
            span.set_attribute("gen_ai.tool.call.result", text)
        span.end()

    def _approval_requested(self, event: ApprovalRequestedEvent) -> None:
        """The batch paused: the run's span notes which calls wait (their arguments only with
        content recorded), and the tool spans of the batch end here, waiting; the calls' outcome
        comes in the run that resumes them."""
        names = [p.tool_name for p in event.pending]
        if self._run is not None:
            attributes: dict[str, Any] = {"yiemagent.approval.pending": names}
            if self.record_content:
                attributes["yiemagent.approval.arguments"] = _json([p.to_dict() for p in event.pending])
            self._run.add_event("approval_requested", attributes)
        for span in self._tools.values():
            span.set_attribute("yiemagent.approval.awaiting", True)
            span.end()
        self._tools.clear()

    # -- helpers ---------------------------------------------------------------------------

    def _reply_status(self, reply: AssistantMessage) -> str:
        """The status description of a failed reply or run: its error text with content
        recorded, else one that quotes none of it (a provider's error may quote the prompt)."""
        if self.record_content:
            return reply.error_message or reply.stop_reason
        return _content_free_status(reply.stop_reason, reply.error_message)

    def _fail(self, span: Any, kind: str, description: str) -> None:
        span.set_attribute("error.type", kind)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, description))

    def _detach(self, name: str) -> None:
        token = getattr(self, name)
        setattr(self, name, None)
        if token is not None:
            with contextlib.suppress(Exception):  # a token of another context: nothing to undo
                self._context.detach(token)

    def _end_open(self, why: str) -> None:
        """End the chat and tool spans still open (a run that ended without closing them)."""
        if self._chat is not None:
            self._fail(self._chat, "incomplete", why)
            self._detach("_chat_token")
            self._chat.end()
            self._chat = None
        for span in self._tools.values():
            self._fail(span, "incomplete", why)
            span.end()
        self._tools.clear()
        if self._run is not None and why.startswith("the run began"):
            self._fail(self._run, "incomplete", why)
            self._detach("_run_token")
            self._run.end()
            self._run = None

    _HANDLERS: ClassVar[dict[type, Any]] = {
        AgentStartEvent: _start_run,
        AgentEndEvent: _end_run,
        MessageStartEvent: _start_chat,
        MessageEndEvent: _end_chat,
        ToolExecStartEvent: _start_tool,
        ToolExecEndEvent: _end_tool,
        ApprovalRequestedEvent: _approval_requested,
    }
