"""``ray_tool``: an ``AgentTool`` whose ``execute`` runs as a Ray task somewhere on the cluster.

The task is a streaming generator: the tool runs on a thread of the task's worker, its partial
results are yielded as they come (so they reach the agent's events), and its result is the last
item. A parallel batch of such calls is a set of tasks that Ray spreads over the cluster's CPUs.
An abort of the call's signal cancels the task (the tool's own signal on the worker is aborted,
so it can stop); a task that fails, is cancelled, or loses its worker or node raises here, which
the pipeline turns into an error result for that call.
"""

from __future__ import annotations

import importlib.util
import queue
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import ray
import ray.cloudpickle
import ray.exceptions

from yiemagent.core._tools import AbortSignal, AgentTool
from yiemagent.errors import RayToolError
from yiemagent.integrations.ray._calls import short_reason

__all__ = ["ray_tool"]

# Seconds the task gives a cancelled tool to notice its aborted signal before the task ends.
CANCEL_GRACE_S = 5.0
# How often the task's main thread looks up from waiting on the tool: Ray delivers a cancel
# there as a KeyboardInterrupt, which is raised only between waits (see ``_next_update``).
WAKE_S = 0.5

_PARTIAL, _RESULT = "partial", "result"


def _next_update(updates: queue.SimpleQueue[tuple[str, Any]]) -> tuple[str, Any] | None:
    """The tool's next update, or ``None`` after ``WAKE_S`` seconds without one."""
    try:
        return updates.get(timeout=WAKE_S)
    except queue.Empty:
        return None


def _cancelled() -> bool:
    """Whether this task was cancelled. Ray raises a cancel in the task's main thread as a
    ``KeyboardInterrupt`` from ``_thread.interrupt_main()``, but CPython raises that only where
    the thread checks for pending signals, which a loop of timed queue waits did not always
    reach (seen on CPython 3.11 with the tool's thread waiting too); so the task also asks."""
    is_canceled = getattr(ray.get_runtime_context(), "is_canceled", None)
    return bool(is_canceled()) if is_canceled is not None else False


class _Cancelled(Exception):
    """This task was cancelled (seen by ``_cancelled``)."""


def _run_tool(execute: Callable[..., Any], tool_call_id: str, args: Any) -> Iterator[tuple[str, Any]]:
    """The task: run ``execute`` on a thread, yield ``("partial", value)`` for each partial
    result and finally ``("result", value)``; re-raise what the tool raised. A cancel
    (``KeyboardInterrupt`` here) aborts the tool's signal and gives it ``CANCEL_GRACE_S``."""
    signal = AbortSignal()
    updates: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = execute(
                tool_call_id, args, signal, lambda partial: updates.put((_PARTIAL, partial))
            )
        except BaseException as exc:  # handed to the task's thread, which raises it
            outcome["error"] = exc
        finally:
            updates.put((_RESULT, None))

    thread = threading.Thread(target=run, name=f"yiemagent-ray-tool-{tool_call_id}", daemon=True)
    thread.start()
    try:
        while True:
            update = _next_update(updates)
            if update is None:
                if _cancelled():
                    raise _Cancelled("the tool's Ray task was cancelled")
                continue
            if update[0] == _RESULT:
                break
            yield update
    except BaseException:  # a cancel: let the tool see its signal and wind down
        signal.abort("the tool's Ray task was cancelled")
        thread.join(CANCEL_GRACE_S)
        raise
    if "error" in outcome:
        raise outcome["error"]
    yield _RESULT, outcome.get("result")


_remote_run_tool = ray.remote(num_returns="streaming")(_run_tool)


def _portable(execute: Callable[..., Any]) -> None:
    """Make ``execute`` travel by value when its module cannot be imported on a worker (a tool
    file loaded by ``load_tools`` lives in a module made in memory): Ray's pickler would
    otherwise send only its module and name."""
    module_name = getattr(execute, "__module__", None)
    module = sys.modules.get(module_name or "")
    if module is None or module_name == "__main__":
        return
    try:
        importable = importlib.util.find_spec(module.__name__) is not None
    except (ImportError, ValueError):  # a module made in memory has no spec to find
        importable = False
    if not importable:
        ray.cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]


def ray_tool(
    tool: AgentTool,
    *,
    num_cpus: float = 1,
    num_gpus: float | None = None,
    resources: Mapping[str, float] | None = None,
    max_retries: int = 0,
    options: Mapping[str, Any] | None = None,
) -> AgentTool:
    """A copy of ``tool`` whose ``execute`` runs as a Ray task (same name, schema, hooks,
    parallel flag and timeout, so the model sees no difference).

    ``num_cpus``, ``num_gpus`` and ``resources`` are what each call reserves on the node that
    runs it; ``max_retries`` is how often Ray reruns a call whose worker died (0 by default: a
    tool may have side effects that must not happen twice); ``options`` are further Ray task
    options (``memory``, ``scheduling_strategy``, ``runtime_env``...). ``tool.execute`` must be
    picklable (a function of an importable module, a tool file loaded by ``load_tools``, or a
    closure over picklable values), and whatever it returns or reports must be picklable too.
    The tool runs with its own ``AbortSignal`` on the worker, aborted when the call is.
    """
    task_options: dict[str, Any] = {"num_cpus": num_cpus, "max_retries": max_retries, **(options or {})}
    if num_gpus is not None:
        task_options["num_gpus"] = num_gpus
    if resources:
        task_options["resources"] = dict(resources)
    runner = _remote_run_tool.options(**task_options)
    original = tool.execute
    _portable(original)
    shipped: list[Any] = []  # the function, put in the object store once, on the first call
    lock = threading.Lock()

    def function_ref() -> Any:
        with lock:
            if not shipped:
                shipped.append(ray.put(original))
            return shipped[0]

    def execute(
        tool_call_id: str,
        args: Any,
        signal: AbortSignal | None,
        on_partial_result: Callable[[Any], None] | None,
    ) -> Any:
        stream: Any = runner.remote(function_ref(), tool_call_id, args)  # an ObjectRefGenerator
        stop_watching = signal.on_abort(lambda: ray.cancel(stream)) if signal is not None else None
        try:
            for ref in stream:
                kind, value = ray.get(ref)
                if kind == _RESULT:
                    return value
                if on_partial_result is not None:
                    on_partial_result(value)
        except ray.exceptions.TaskCancelledError as exc:
            raise RayToolError("the tool's Ray task was cancelled (the call was aborted)") from exc
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, Exception):
                raise cause from exc
            raise RayToolError(f"the tool's Ray task failed: {short_reason(exc)}") from exc
        except ray.exceptions.RayError as exc:  # the worker, its node or the result was lost
            raise RayToolError(f"the tool's Ray task did not finish: {short_reason(exc)}") from exc
        finally:
            if stop_watching is not None:
                stop_watching()
        raise RayToolError("the tool's Ray task ended without a result")

    return attrs.evolve(tool, execute=execute)
