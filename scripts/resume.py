"""Resume after a terminate: hand a long job off, end the run, and go on when the job is done.

A tool whose result has ``terminate=True`` ends the run after its batch (when every call of the
batch asks for it): the response has ``stop_reason="tool_use_terminated"`` and the model is not
called again. That is an asynchronous handoff: ``startReport`` queues a job and returns at once.
When the job is done, ``agent.resume()`` starts a run from the history as it is, with no new
message: the model sees the handoff's result, fetches the report and answers. ``resume()`` on
a conversation that ends with the model's answer raises ``ValueError``: there is nothing to
resume. The model is scripted (see ``_scripted.py``).
"""

from __future__ import annotations

import itertools

from _scripted import ScriptedModel, answer, calls, show, use

from yiemagent import AgentToolResult, YiemAgent, function_tool

JOBS: dict[str, str | None] = {}  # job id -> the report, None while it is being written
_IDS = itertools.count(7)


@function_tool
def startReport(topic: str) -> AgentToolResult:  # camelCase: the name the model calls
    """Start writing a report in the background; it takes a while.

    Args:
        topic: What the report is about.
    """
    job = f"job-{next(_IDS)}"
    JOBS[job] = None
    return AgentToolResult(
        f"Report {job} on {topic!r} is being written; you will be resumed when it is done.",
        details={"job": job},
        terminate=True,
    )


@function_tool
def fetchReport(job: str) -> str:
    """Fetch a finished report.

    Args:
        job: The job id startReport gave.
    """
    report = JOBS.get(job)
    return report if report is not None else f"{job} is not finished"


def main() -> None:
    """Hand off, finish the job, resume, and try a resume with nothing left to do."""
    model = ScriptedModel(
        [
            calls(use("startReport", topic="tea exports"), text="I will start the report."),
            calls(use("fetchReport", job="job-7")),
            "Your report: tea exports grew 4% last year, led by Kenya.",
        ]
    )
    with YiemAgent(llm_call=model, tools=[startReport, fetchReport], agent_event_sink=show) as agent:
        handoff = agent.prompt("Write me a report on tea exports.", timeout=60)
        print(f"run 1 ended: stop_reason={handoff.stop_reason}; the model was called {model.calls} time(s)")

        JOBS["job-7"] = "Tea exports grew 4% last year, led by Kenya."  # the background work
        print("job-7 is done: resuming")
        agent.resume()
        final = agent.take_response(timeout=60)
        print(f"run 2 ended: stop_reason={final.stop_reason}; answer: {answer(final)}")

        try:
            agent.resume()
        except ValueError as exc:
            print(f"resume() again: ValueError: {exc}")
        print("history:", " -> ".join(m.role for m in agent.messages))


if __name__ == "__main__":
    main()
