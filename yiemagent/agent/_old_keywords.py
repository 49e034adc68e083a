"""The flat keywords ``YiemAgent`` and ``prompt`` took before their settings were grouped, each
mapped to its option and field, and ``regroup``, which turns the old keywords given into those
options with one ``DeprecationWarning`` each. They keep working for one release."""

from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping
from typing import Any

from yiemagent.agent._options import ContextOptions, OutputOptions, QueueOptions, ToolOptions

__all__ = ["AGENT_KEYWORDS", "OLD_KEYWORDS", "OPTION_TYPES", "PROMPT_KEYWORDS", "group", "regroup"]

OPTION_TYPES: dict[str, type[Any]] = {
    "output": OutputOptions,
    "tool_options": ToolOptions,
    "context": ContextOptions,
    "queues": QueueOptions,
}

# old keyword -> (the keyword of its option, the option's field)
OLD_KEYWORDS: dict[str, tuple[str, str]] = {
    "output_schema": ("output", "schema"),
    "output_mode": ("output", "mode"),
    "output_retries": ("output", "retries"),
    "validate_output": ("output", "validate"),
    "tool_execution": ("tool_options", "execution"),
    "tool_timeout_s": ("tool_options", "timeout_s"),
    "max_parallel_tools": ("tool_options", "max_parallel"),
    "max_repeated_calls": ("tool_options", "max_repeated_calls"),
    "skip_tools_on_steer": ("tool_options", "skip_on_steer"),
    "max_tool_result_chars": ("tool_options", "max_result_chars"),
    "context_window": ("context", "window"),
    "context_strategy": ("context", "strategy"),
    "steering_mode": ("queues", "steering"),
    "follow_up_mode": ("queues", "follow_up"),
}
AGENT_KEYWORDS = frozenset(OLD_KEYWORDS)
PROMPT_KEYWORDS = frozenset(name for name, (option, _) in OLD_KEYWORDS.items() if option == "output")


def regroup(
    where: str,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    allowed: Collection[str],
    stacklevel: int,
) -> dict[str, Any]:
    """The options that the old keywords ``old`` given to ``where`` (``"YiemAgent"``, say)
    stand for, by option keyword, built from their fields (and checked, as any option is).

    Each old keyword gives one ``DeprecationWarning`` naming its new spelling, at
    ``stacklevel`` (counted from the caller of this function). A keyword not in ``allowed``
    raises ``TypeError`` as Python does for an unexpected keyword, and so does an old keyword
    whose option is also given in ``new`` (not ``None``)."""
    for name in old:
        if name not in allowed:
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")
        option, field = OLD_KEYWORDS[name]
        if new.get(option) is not None:
            raise TypeError(f"{where}() got both {name}= and {option}=; give {field} in {option}= only")
    for name in old:
        option, field = OLD_KEYWORDS[name]
        warnings.warn(
            f"{name}= is deprecated and will be removed in the next release; use "
            f"{option}={OPTION_TYPES[option].__name__}({field}=...)",
            DeprecationWarning,
            stacklevel=stacklevel + 1,
        )
    return group(old)


def group(old: Mapping[str, Any]) -> dict[str, Any]:
    """The options the old keywords ``old`` stand for, by option keyword, with no warning (for
    settings that keep the flat names as plain data, as a Ray cluster's ``agent_options``).
    Raises ``KeyError`` for a name that is not an old keyword."""
    fields: dict[str, dict[str, Any]] = {}
    for name, value in old.items():
        option, field = OLD_KEYWORDS[name]
        fields.setdefault(option, {})[field] = value
    return {option: OPTION_TYPES[option](**given) for option, given in fields.items()}
