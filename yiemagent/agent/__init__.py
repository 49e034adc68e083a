"""The agent shell: ``YiemAgent`` (channels, a worker thread, settings and listeners around the
core's run loop), and sessions as plain data. It never imports a provider, an integration or
the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yiemagent._lazy import Exports

_EXPORTS = Exports(
    __name__,
    {
        "_agent": ("YiemAgent", "follow_up", "on_agent_created", "resume", "run_agent", "take_response"),
        "_options": ("ContextOptions", "OutputOptions", "QueueOptions", "ToolOptions"),
        "_session": ("SessionData", "load_session", "save_session", "session_from_dict", "session_to_dict"),
    },
)
__all__ = _EXPORTS.names


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name)


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())


if TYPE_CHECKING:
    from yiemagent.agent._agent import YiemAgent as YiemAgent
    from yiemagent.agent._agent import follow_up as follow_up
    from yiemagent.agent._agent import on_agent_created as on_agent_created
    from yiemagent.agent._agent import resume as resume
    from yiemagent.agent._agent import run_agent as run_agent
    from yiemagent.agent._agent import take_response as take_response
    from yiemagent.agent._options import ContextOptions as ContextOptions
    from yiemagent.agent._options import OutputOptions as OutputOptions
    from yiemagent.agent._options import QueueOptions as QueueOptions
    from yiemagent.agent._options import ToolOptions as ToolOptions
    from yiemagent.agent._session import SessionData as SessionData
    from yiemagent.agent._session import load_session as load_session
    from yiemagent.agent._session import save_session as save_session
    from yiemagent.agent._session import session_from_dict as session_from_dict
    from yiemagent.agent._session import session_to_dict as session_to_dict
