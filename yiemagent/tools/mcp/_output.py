"""Checking an MCP tool's structured result against its output schema, safely.

The SDK checks each result's ``structuredContent`` against the ``outputSchema`` the server listed
for the tool, with jsonschema's stock validator, which matches ``pattern`` with Python's ``re``.
A hostile server could pair a backtracking pattern (``^(a+)+$``) with a result that makes ``re``
run for ever while holding the GIL: no timeout or abort would stop it. ``OutputSchemas`` does the
SDK's check with the library's own validator instead: no reference is ever fetched, and patterns
are matched by RE2 in linear time (a pattern RE2 cannot run is refused, as for input schemas from
a server).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from jsonschema.exceptions import best_match

from yiemagent.core._json_safety import clip
from yiemagent.core._tools import compile_schema_validator

if TYPE_CHECKING:
    import mcp.types as mcp_types
    from jsonschema.protocols import Validator

__all__ = ["OutputSchemas"]


class OutputSchemas:
    """The output schemas of one connection's tools, by the server's tool name, and their
    validators, compiled once per schema. Used from the connection's event loop thread only."""

    def __init__(self) -> None:
        self._schemas: dict[str, Any] = {}
        self._validators: dict[str, Validator | str] = {}

    def absorb(self, listed: Iterable[mcp_types.Tool]) -> None:
        """Take the output schemas of a complete tool listing (a changed schema is compiled
        again on its next use; tools no longer listed are forgotten)."""
        schemas = {tool.name: tool.output_schema for tool in listed}
        self._validators = {
            name: v
            for name, v in self._validators.items()
            if name in schemas and schemas[name] == self._schemas.get(name)
        }
        self._schemas = schemas

    def install(self, session: Any) -> None:
        """Make ``session`` (the SDK's ``ClientSession``) check results with this object."""
        session.validate_tool_result = self.validate

    async def validate(self, name: str, result: mcp_types.CallToolResult) -> None:
        """The SDK's ``validate_tool_result`` contract: raise ``RuntimeError`` when the tool has an
        output schema and its result has no structured content, or content that breaks it, or
        when the schema itself is unusable; return quietly otherwise."""
        schema = self._schemas.get(name)
        if schema is None:
            return
        validator = self._validator(name, schema)
        if isinstance(validator, str):
            raise RuntimeError(f"Invalid schema for tool {name}: {validator}")
        if result.structured_content is None:
            raise RuntimeError(f"Tool {name} has an output schema but did not return structured content")
        error = best_match(validator.iter_errors(result.structured_content))
        if error is not None:
            raise RuntimeError(
                f"Invalid structured content returned by tool {name}: {clip(error.message, 400)}"
            )

    def _validator(self, name: str, schema: Any) -> Validator | str:
        """The compiled validator for ``schema``, or why it cannot be used."""
        found = self._validators.get(name)
        if found is None:
            try:
                found = compile_schema_validator(None, schema, untrusted=True)
            except ValueError as exc:
                found = str(exc).replace("input_schema", "output schema", 1)
            self._validators[name] = found
        return found
