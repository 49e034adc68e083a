"""Session files that are damaged, half-written or written at once: every bad file is a
``SessionError``, a killed save's temporary file is cleaned up by the next, concurrent saves to one
path all succeed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from yiemagent.agent._session import SessionData, load_session, save_session, session_from_dict
from yiemagent.core._content import TextContent
from yiemagent.core._messages import UserMessage
from yiemagent.errors import SessionError

# -- 18: session files --------------------------------------------------------------------------


def session_text(timestamp: str = "1", details: str = "{}") -> str:
    return (
        '{"format": "yiemagent.session", "version": 1, "session_id": "s", "system_prompt": "",'
        ' "model": null, "messages": [{"role": "toolResult", "tool_call_id": "c", "tool_name": "t",'
        f' "content": [], "details": {details}, "timestamp": {timestamp}}}]}}'
    )


def test_session_text_helper_gives_a_loadable_session(tmp_path: Path) -> None:
    path = tmp_path / "ok.json"
    path.write_text(session_text("7"))
    assert load_session(path).messages[0].timestamp == 7


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (session_text("Infinity"), "Infinity is not a JSON value"),
        (session_text("-Infinity"), "-Infinity is not a JSON value"),
        (session_text("NaN"), "NaN is not a JSON value"),
        (session_text("1e400"), "OverflowError"),
        (session_text(details="[" * 100_000 + "]" * 100_000), "nested too deeply"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": ' * 50_000 + "1" + "}" * 50_000, "nested too deeply"),
    ],
)
def test_every_bad_session_file_raises_session_error(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(SessionError) as info:
        load_session(path)
    assert str(info.value).startswith(f"{path}: damaged session file")
    assert fragment in str(info.value)


def test_session_from_dict_raises_session_error_for_an_infinite_timestamp() -> None:
    document = json.loads(session_text("1"))
    document["messages"][0]["timestamp"] = float("inf")
    with pytest.raises(SessionError, match=r"^memo: damaged session file \(OverflowError"):
        session_from_dict(document, "memo")


SESSION = SessionData("s", "Be brief.", None, [UserMessage([TextContent("hello")], timestamp=5)])


def temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def killed_save(path: Path) -> None:
    """Run save_session in a child process that is killed (SIGKILL) just before the rename."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from yiemagent.core._content import TextContent
        from yiemagent.core._messages import UserMessage
        from yiemagent.agent._session import SessionData, save_session
        os.replace = lambda *_: os.kill(os.getpid(), signal.SIGKILL)
        save_session(SessionData("s", "", None, [UserMessage([TextContent("lost")])]), {str(path)!r})
        """
    )
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_saves_temporary_file_is_removed_by_the_next_save(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    save_session(SESSION, path)
    killed_save(path)
    [left] = temp_files(tmp_path)
    assert re.fullmatch(r"\.chat\.json\.[0-9a-f]{32}\.tmp", left)  # named after its target
    assert load_session(path) == SESSION  # the killed save changed nothing

    stale = time.time() - 3600  # as after a restart an hour later
    os.utime(tmp_path / left, (stale, stale))
    save_session(SESSION, path)
    assert temp_files(tmp_path) == []
    assert load_session(path) == SESSION


def test_a_save_keeps_fresh_temporary_files_and_those_of_other_targets(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    live = tmp_path / f".chat.json.{'a' * 32}.tmp"  # what a save still running has on disk
    live.write_text("{}")
    other = tmp_path / f".other.json.{'b' * 32}.tmp"
    other.write_text("{}")
    unrelated = tmp_path / f".chat.json.{'c' * 32}.tmp.bak"
    unrelated.write_text("{}")
    stale = time.time() - 3600
    for old in (other, unrelated):
        os.utime(old, (stale, stale))
    save_session(SESSION, path)
    assert temp_files(tmp_path) == sorted([live.name, other.name])
    assert unrelated.exists()


def test_concurrent_saves_to_one_path_all_succeed(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    workers = 8
    barrier = threading.Barrier(workers)
    errors: list[BaseException] = []

    def save_many(n: int) -> None:
        barrier.wait(timeout=30)
        data = SessionData(f"s{n}", "", None, [])
        for _ in range(20):
            try:
                save_session(data, path)
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=save_many, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads) and errors == []
    assert load_session(path).session_id in {f"s{n}" for n in range(workers)}
    assert temp_files(tmp_path) == []


def test_a_long_file_name_still_gets_a_temporary_file_of_a_valid_length(tmp_path: Path) -> None:
    path = tmp_path / ("é" * 120 + ".json")  # 241 bytes in UTF-8: the name alone nearly fills NAME_MAX
    save_session(SESSION, path)
    assert load_session(path) == SESSION
