"""Session stores: ``DirectoryStore`` on a folder and ``RedisStore`` on a real ``redis-server``
(started on a free loopback port by the test, with no persistence, and stopped at the end)."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis_helpers import free_port, running_redis
from tiers import absent

from yiemagent import AgentToolCall, AssistantMessage, LlmModel, TextContent, ToolResultMessage, UserMessage
from yiemagent.agent._session import SessionData
from yiemagent.errors import SessionError, SessionStoreError
from yiemagent.integrations._session_store import DirectoryStore, RedisStore


def session(session_id: str = "s1", turns: int = 1) -> SessionData:
    """A session with a tool call and its result, ``turns`` times."""
    messages = []
    for n in range(turns):
        messages += [
            UserMessage(f"question {n}"),
            AssistantMessage([AgentToolCall(f"c{n}", "echo", {"text": "é", "n": n})], stop_reason="toolUse"),
            ToolResultMessage(f"c{n}", "echo", [TextContent("echo: é")], details={"n": n}),
            AssistantMessage([TextContent(f"answer {n}")]),
        ]
    return SessionData(session_id, "You are terse.", LlmModel("m", provider="p"), messages)


# -- DirectoryStore ------------------------------------------------------------------------------


def test_directory_store_round_trip(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "sessions")  # created on the first save
    assert store.load("s1") is None and store.session_ids() == []
    data = session("s1", turns=2)
    store.save(data)
    assert store.load("s1") == data
    store.save(session("s1", turns=3))  # replaced as a whole
    loaded = store.load("s1")
    assert loaded is not None and len(loaded.messages) == 12
    assert store.delete("s1") is True and store.delete("s1") is False
    assert store.load("s1") is None


def test_directory_store_file_names_for_any_id(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    ids = ["user/42", "ünïcödé", "..", ".hidden", "a b?c*", "x" * 400, "+abc"]
    for sid in ids:
        store.save(session(sid))
    assert store.session_ids() == sorted(ids)
    for sid in ids:
        path = Path(store.path_of(sid))
        assert path.parent == tmp_path and path.exists()
        loaded = store.load(sid)
        assert loaded is not None and loaded.session_id == sid
    assert Path(store.path_of("x" * 400)).name.startswith("+")
    assert Path(store.path_of("user/42")).name == "user%2F42.json"


def test_directory_store_reports_a_damaged_session(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    Path(store.path_of("bad")).write_text("{not json", encoding="utf-8")
    with pytest.raises(SessionError, match="damaged"):
        store.load("bad")


def test_directory_store_travels_by_pickle(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    data = session("s1")
    store.save(data)
    copy = pickle.loads(pickle.dumps(store))
    assert copy.load("s1") == data and copy.folder == store.folder


def test_directory_store_refuses_an_empty_id(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="session_id"):
        DirectoryStore(tmp_path).load("")


# -- RedisStore ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A redis-server of this module's own, stopped after its last test."""
    pytest.importorskip("redis", reason=absent("ray"))
    with running_redis() as url:
        yield url


def test_redis_store_round_trip(redis_url: str) -> None:
    store = RedisStore(redis_url, prefix="t1:")
    assert store.load("s1") is None
    data = session("s1", turns=2)
    store.save(data)
    assert store.load("s1") == data
    assert store.session_ids() == ["s1"]
    assert store.delete("s1") is True and store.delete("s1") is False
    assert store.load("s1") is None


def test_redis_store_prefixes_keep_stores_apart(redis_url: str) -> None:
    first, second = RedisStore(redis_url, prefix="a*:"), RedisStore(redis_url, prefix="a:")
    first.save(session("x"))
    second.save(session("y"))
    second.save(session("user/ü"))
    assert first.session_ids() == ["x"]  # "*" in a prefix is matched literally
    assert second.session_ids() == ["user/ü", "y"]


def test_redis_store_expiry(redis_url: str) -> None:
    store = RedisStore(redis_url, prefix="ttl:", ttl_s=300)
    store.save(session("s1"))
    remaining = store.client().pttl(store.key_of("s1"))
    assert 0 < remaining <= 300_000
    with pytest.raises(ValueError, match="ttl_s"):
        RedisStore(redis_url, ttl_s=0)


def test_redis_store_travels_by_pickle_and_reconnects(redis_url: str) -> None:
    store = RedisStore(redis_url, prefix="p:")
    data = session("s1")
    store.save(data)
    copy = pickle.loads(pickle.dumps(store))
    assert copy._client is None  # no connection travels
    assert copy.load("s1") == data


def test_redis_store_saves_a_history_holding_a_lone_surrogate_whole(redis_url: str) -> None:
    # JSON's "\ud83d" (half an emoji, as a model may send) reads as a lone surrogate.
    data = SessionData("s1", "", None, [UserMessage("half an emoji: \ud83d", timestamp=1)])
    store = RedisStore(redis_url, prefix="lone:")
    store.save(data)
    assert store.load("s1") == data


def test_redis_store_reports_a_damaged_session(redis_url: str) -> None:
    store = RedisStore(redis_url, prefix="bad:")
    store.client().set(store.key_of("s1"), b'{"format": "yiemagent.session", "version": 99}')
    with pytest.raises(SessionError, match="version 99"):
        store.load("s1")
    store.client().set(store.key_of("s2"), b"\xff\xfe")
    with pytest.raises(SessionError, match="UTF-8"):
        store.load("s2")


def test_redis_store_down_is_a_store_error() -> None:
    pytest.importorskip("redis", reason=absent("ray"))
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", socket_timeout_s=2.0)
    with pytest.raises(SessionStoreError, match="cannot load session 's1'"):
        store.load("s1")
    with pytest.raises(SessionStoreError, match="cannot save"):
        store.save(session("s1"))


def test_redis_store_repr_hides_the_password() -> None:
    store = RedisStore("redis://user:hunter2@db.example:6379/0")
    assert "hunter2" not in repr(store) and "db.example" in repr(store)
