"""Saving and loading sessions: exact round trips, atomic writes, clear errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agent_helpers import WAIT, ScriptedLLM, last_user_text, reply, text
from tiers import absent

from yiemagent import (
    AgentToolCall,
    AssistantMessage,
    ImageContent,
    LlmModel,
    LlmUsage,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
    YiemAgent,
)
from yiemagent.agent._session import SessionData, load_session, save_session
from yiemagent.core import RunConfig
from yiemagent.errors import SessionError
from yiemagent.integrations._session_store import DirectoryStore, RedisStore

HISTORY = [
    UserMessage([TextContent("look"), ImageContent("iVBORw0KGgo=", "image/png")], timestamp=1),
    AssistantMessage(
        content=[
            ThinkingContent("hmm", signature="sig"),
            TextContent("checking"),
            AgentToolCall("call_1", "inspect", {"deep": {"list": [1, 2.5, None, "x"]}}),
            {"type": "tool_calls", "tool_calls": [{"id": "call_2", "name": "t", "arguments": {}}]},
        ],
        api="openai-completions",
        provider="openai",
        model="gpt-x",
        usage=LlmUsage(10, 5, 1, 0, 16, 0.001),
        stop_reason="toolUse",
        timestamp=2,
    ),
    ToolResultMessage(
        "call_1",
        "inspect",
        [TextContent("found"), ImageContent("AAAA", "image/jpeg")],
        details={"rows": [{"id": 1}], "addedToolNames": ["x"]},
        added_tool_names=["x"],
        is_error=True,
        timestamp=3,
    ),
]


def test_save_load_round_trip_is_exact(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    agent = YiemAgent(
        llm_call=ScriptedLLM(),
        system_prompt="Be terse.",
        model=LlmModel("gpt-x", "openai"),
        messages=HISTORY,
        session_id="abc",
    )
    agent.save(path)
    agent.shutdown()
    loaded = YiemAgent.load(path, llm_call=ScriptedLLM())
    try:
        assert loaded.session_id == "abc"
        assert loaded.system_prompt == "Be terse."
        assert loaded.model == LlmModel("gpt-x", "openai")
        assert loaded.messages == HISTORY
    finally:
        loaded.shutdown()


def test_loaded_agent_continues_the_conversation(tmp_path: Path) -> None:
    path = str(tmp_path / "chat.json")
    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        agent.prompt("remember me", timeout=WAIT)
        agent.save(path)
    llm = ScriptedLLM(lambda req: reply(f"{len(req['messages'])} msgs, last {last_user_text(req)}"))
    with YiemAgent.load(path, llm_call=llm) as again:
        assert text(again.prompt("still there?", timeout=WAIT)) == "4 msgs, last still there?"


def test_session_file_holds_no_callables_or_keys(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    with YiemAgent(llm_call=ScriptedLLM(), messages=HISTORY) as agent:
        agent.save(path)
    data = json.loads(path.read_text())
    assert data["format"] == "yiemagent.session" and data["version"] == 1
    assert set(data) == {"format", "version", "session_id", "system_prompt", "model", "messages", "usage"}


def test_crash_mid_write_leaves_old_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.json"
    with YiemAgent(llm_call=ScriptedLLM(), messages=HISTORY[:1]) as agent:
        agent.save(path)
        before = path.read_bytes()
        agent.prompt("more", timeout=WAIT)

        def crash(*_: Any) -> None:
            raise OSError("disk pulled")

        monkeypatch.setattr(os, "replace", crash)
        with pytest.raises(OSError, match="disk pulled"):
            agent.save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]  # no temporary left behind


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "damaged session file"),
        ('{"format": "yiemagent.session", "version": 99}', "version 99 is not supported"),
        ('{"format": "something else"}', "not a yiemagent session"),
        (
            '{"format": "yiemagent.session", "version": 1, "session_id": "a", "system_prompt": "",'
            ' "model": null, "messages": [{"role": "robot"}]}',
            "damaged session file",
        ),
        ('{"format": "yiemagent.session", "version": 1}', "damaged session file"),
    ],
)
def test_bad_session_files_are_named_in_the_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(SessionError, match=message) as info:
        YiemAgent.load(path, llm_call=ScriptedLLM())
    assert str(path) in str(info.value)


def test_missing_session_file(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="cannot read"):
        YiemAgent.load(tmp_path / "nope.json", llm_call=ScriptedLLM())


def test_a_session_file_gets_the_usual_mode(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    old_umask = os.umask(0o022)
    try:
        with YiemAgent(llm_call=ScriptedLLM()) as agent:
            agent.save(path)
            assert path.stat().st_mode & 0o777 == 0o644
            path.chmod(0o600)
            agent.save(path)  # replacing a file keeps its mode
            assert path.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old_umask)


# -- session ids that cannot be written ---------------------------------------------------------

LONE = "user-\udc80-7"  # a lone surrogate, as ``bytes.decode(errors="surrogateescape")`` makes


def _agent_with(session_id: str) -> None:
    YiemAgent(llm_call=ScriptedLLM(), session_id=session_id).shutdown()


def _agent_renamed(session_id: str) -> None:
    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        agent.session_id = session_id


def _saved(tmp: Path) -> Any:
    return lambda sid: save_session(SessionData(sid, "", None, []), tmp / "s.json")


def _directory(tmp: Path, action: str) -> Any:
    store = DirectoryStore(tmp / "store")
    if action == "save":
        return lambda sid: store.save(SessionData(sid, "", None, []))
    return getattr(store, action)


def _redis(action: str) -> Any:
    store = RedisStore("redis://127.0.0.1:1/0")  # the id is refused before any connection
    if action == "save":
        return lambda sid: store.save(SessionData(sid, "", None, []))
    return getattr(store, action)


def _pool_slot(sid: str) -> None:
    pytest.importorskip("ray", reason=absent("ray"))
    from yiemagent.integrations.ray import _pool as pool

    # slot_of reads only the pool's size; a real pool would start Ray actors for nothing here.
    pool.AgentPool.slot_of(SimpleNamespace(size=4), sid)


def _run_config(sid: str) -> None:
    RunConfig(llm_call=print, session_id=sid)  # what run_loop sends providers as the id


@pytest.mark.parametrize(
    "accept",
    [
        lambda _tmp: _agent_with,
        lambda _tmp: _agent_renamed,
        _saved,
        lambda tmp: _directory(tmp, "save"),
        lambda tmp: _directory(tmp, "load"),
        lambda tmp: _directory(tmp, "delete"),
        lambda tmp: _directory(tmp, "path_of"),
        lambda _tmp: _redis("save"),
        lambda _tmp: _redis("load"),
        lambda _tmp: _redis("delete"),
        lambda _tmp: _pool_slot,
        lambda _tmp: _run_config,
    ],
    ids=[
        "agent",
        "agent.session_id=",
        "save_session",
        "DirectoryStore.save",
        "DirectoryStore.load",
        "DirectoryStore.delete",
        "DirectoryStore.path_of",
        "RedisStore.save",
        "RedisStore.load",
        "RedisStore.delete",
        "AgentPool.slot_of",
        "RunConfig",
    ],
)
def test_a_session_id_with_a_lone_surrogate_is_refused_naming_the_session_id(
    tmp_path: Path, accept: Any
) -> None:
    with pytest.raises(ValueError) as info:
        accept(tmp_path)(LONE)
    message = str(info.value)
    assert message.startswith("session_id 'user-\\udc80-7' holds a lone surrogate ('\\udc80' at index 5)")
    assert "use an id of whole characters" in message  # what to do
    assert not isinstance(info.value, UnicodeError)  # not the codec's bare complaint
    assert list(tmp_path.rglob("*")) in ([], [tmp_path / "store"])  # nothing was written


def test_a_session_file_whose_id_holds_a_lone_surrogate_is_named_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "odd.json"
    path.write_text(
        '{"format": "yiemagent.session", "version": 1, "session_id": "a\\udc80",'
        ' "system_prompt": "", "model": null, "messages": []}',
        encoding="utf-8",
    )
    with pytest.raises(
        SessionError,
        match=r"damaged session file .*session_id 'a\\udc80' holds "
        r"a lone surrogate",
    ) as info:
        load_session(path)
    assert str(path) in str(info.value)


def test_a_history_holding_a_lone_surrogate_is_saved_whole(tmp_path: Path) -> None:
    # JSON's "\ud83d" (half an emoji, as a model may send) reads as a lone surrogate.
    odd = [
        UserMessage("half an emoji: \ud83d", timestamp=1),
        AssistantMessage([AgentToolCall("c1", "t", {"q": "\udc80"})], timestamp=2),
    ]
    data = SessionData("s1", "system \ud800", None, odd)
    save_session(data, tmp_path / "s.json")
    assert load_session(tmp_path / "s.json") == data
    (tmp_path / "s.json").read_bytes().decode("utf-8")  # a valid UTF-8 file, escapes and all
    store = DirectoryStore(tmp_path / "store")
    store.save(data)
    assert store.load("s1") == data


def test_a_path_that_is_not_a_session_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    fifo = tmp_path / "session.fifo"
    os.mkfifo(fifo)  # no writer: opening it for reading the usual way would block for ever
    with pytest.raises(SessionError, match=r"session\.fifo: cannot read session file: it is a FIFO"):
        load_session(fifo)
    with pytest.raises(SessionError, match="/dev/zero: cannot read session file: it is a character"):
        load_session("/dev/zero")  # would read for ever
    with pytest.raises(SessionError, match="cannot read session file: it is a folder"):
        load_session(tmp_path)
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes('{"format": "yiemagent.session", "note": "café"}'.encode("latin-1"))
    with pytest.raises(SessionError, match=r"latin1\.json: damaged session file \(not UTF-8"):
        load_session(latin1)
