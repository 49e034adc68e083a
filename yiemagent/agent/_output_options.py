"""An agent's output settings (its ``OutputOptions``, with the defaults for the fields not set)
and the ``OutputSpec`` of a run: the agent's, or a prompt's own options over the agent's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from yiemagent.core._output import OUTPUT_MODES, OutputMode, OutputSpec
from yiemagent.output import output_spec

__all__ = ["OutputDefaults"]


def _check_mode(_inst: Any, _attr: Any, value: Any) -> None:
    if value not in OUTPUT_MODES:
        raise ValueError(f"output_mode must be one of {', '.join(map(repr, OUTPUT_MODES))}, got {value!r}")


@attrs.frozen
class OutputDefaults:
    """The agent's output settings, checked at construction; ``spec()`` builds the run's
    ``OutputSpec`` (``None`` without a schema) once, and again only for a prompt's options."""

    schema: Any
    mode: OutputMode = attrs.field(default="tool", validator=_check_mode)
    retries: int = 2
    validate: Callable[[Any], Any] | None = None
    built: OutputSpec | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        if self.validate is not None and not callable(self.validate):
            raise TypeError(f"validate_output must be callable, got {type(self.validate).__name__}")
        if self.schema is not None:
            spec = output_spec(self.schema, mode=self.mode, retries=self.retries, validate=self.validate)
            object.__setattr__(self, "built", spec)
        else:
            OutputSpec(schema={"type": "object"}, retries=self.retries)  # checks the retries

    def spec(self) -> OutputSpec | None:
        """The spec of the agent's own settings (``None`` without a schema)."""
        return self.built

    def with_options(
        self,
        schema: Any = None,
        mode: OutputMode | None = None,
        retries: int | None = None,
        validate: Callable[[Any], Any] | None = None,
    ) -> OutputSpec:
        """The spec of a prompt's options over the agent's settings. Options without a schema
        anywhere raise ``ValueError`` saying so."""
        schema = self.schema if schema is None else schema
        if schema is None:
            raise ValueError(
                "an output's mode, retries and validate need an output_schema: give prompt() or "
                "YiemAgent() output=OutputOptions(schema=...)"
            )
        options: dict[str, Any] = {
            "mode": self.mode if mode is None else mode,
            "retries": self.retries if retries is None else retries,
            "validate": self.validate if validate is None else validate,
        }
        if isinstance(schema, OutputSpec):
            return attrs.evolve(schema, **options)
        return output_spec(schema, **options)
