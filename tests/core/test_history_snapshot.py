"""``HistorySnapshot``, what the default ``prepare_context`` gives each LLM call instead of a copy of
the history: it holds what the list held when it was taken, while the agent's history grows; a hook
that edits it edits a copy of its own; it slices, compares and pickles like the list it stands for."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from agent_helpers import WAIT, call, echo_tool, reply

from yiemagent import AgentContext, AgentState, UserMessage, YiemAgent, prepare_context
from yiemagent.core import HistorySnapshot


def words(messages: Any) -> list[str]:
    return [m.content[0].text for m in messages]


def history(*texts: str) -> list[UserMessage]:
    return [UserMessage(t) for t in texts]


def test_a_snapshot_keeps_what_the_list_held_when_it_was_taken() -> None:
    messages = history("a", "b")
    snapshot = HistorySnapshot(messages)
    messages.append(UserMessage("c"))
    assert len(snapshot) == 2 and words(snapshot) == ["a", "b"] and snapshot == messages[:2]
    assert snapshot[-1] is messages[1]
    with pytest.raises(IndexError):
        snapshot[2]


@pytest.mark.parametrize("index", [slice(None), slice(1, None), slice(None, None, -1), slice(-5, 9, 2)])
def test_slices_of_a_snapshot_are_the_slices_of_the_list_it_stands_for(index: slice) -> None:
    messages = history("a", "b", "c")
    snapshot = HistorySnapshot(messages)
    messages.append(UserMessage("d"))
    assert snapshot[index] == messages[:3][index]


def test_editing_a_snapshot_edits_a_copy_and_never_the_agents_history() -> None:
    messages = history("a", "b", "c")
    snapshot = HistorySnapshot(messages)
    snapshot.append(UserMessage("x"))
    del snapshot[0]
    snapshot.insert(0, UserMessage("first"))
    snapshot[1] = UserMessage("y")
    snapshot += [UserMessage("z")]
    assert words(snapshot) == ["first", "y", "c", "x", "z"]
    assert words(messages) == ["a", "b", "c"]


def test_a_snapshot_pickles_and_copies_as_its_messages_alone() -> None:
    messages = history("a", "b")
    snapshot = HistorySnapshot(messages)
    messages.append(UserMessage("later"))
    for other in (pickle.loads(pickle.dumps(snapshot)), copy.copy(snapshot), copy.deepcopy(snapshot)):
        assert words(other) == ["a", "b"]
    assert b"later" not in pickle.dumps(snapshot)


def test_a_snapshot_longer_than_its_list_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot hold 3"):
        HistorySnapshot(history("a"), 3)


def test_a_prepare_context_hook_may_trim_and_add_to_the_default_context() -> None:
    """The pattern users write: take the default context and edit its messages in place."""
    seen: list[list[str]] = []

    def keep_last_two_and_note(state: AgentState) -> AgentContext:
        context = prepare_context(state)
        del context.messages[:-2]
        context.messages.append(UserMessage("(be brief)"))
        return context

    def answer(request: Any) -> Any:
        seen.append([m.role for m in request.context.messages])
        return reply("done") if len(seen) > 1 else call("echo", {"text": "hi"})

    agent = YiemAgent(llm_call=answer, tools=[echo_tool()])
    agent.prepare_context = keep_last_two_and_note
    response = agent.prompt("first question", timeout=WAIT)
    assert response.error_message is None
    assert seen == [["user", "user"], ["assistant", "toolResult", "user"]]
    assert [m.role for m in agent.messages] == ["user", "assistant", "toolResult", "assistant"]
