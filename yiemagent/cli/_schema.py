"""``yiemagent run --schema FILE|JSON``: the output's JSON Schema from the command line, read
and checked before anything starts, so a bad one is one line and exit 2."""

from __future__ import annotations

import json
from typing import Any

from yiemagent.core._files import UnreadableFileError, read_regular_file
from yiemagent.core._output import OutputSpec
from yiemagent.errors import CliError

__all__ = ["MAX_SCHEMA_BYTES", "read_schema"]

MAX_SCHEMA_BYTES = 1 << 20


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse(text: str, where: str) -> Any:
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"--schema {where} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise CliError(f"--schema {where} is not JSON: {exc}") from None


def _read(path: str) -> str:
    try:
        data = read_regular_file(path, MAX_SCHEMA_BYTES)
    except UnreadableFileError as exc:
        raise CliError(f"--schema {path}: {exc}") from None
    except OSError as exc:
        raise CliError(
            f"--schema {path}: cannot read it ({exc.strerror or exc}); give a JSON Schema file, "
            "or the schema itself as JSON text ('{...}')"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CliError(f"--schema {path} is not UTF-8 text") from None


def read_schema(value: str) -> dict[str, Any]:
    """The JSON Schema ``--schema`` gives: JSON text when it starts with ``{``, else the path of
    a file holding one. ``CliError`` (exit 2) saying what is wrong for a file that cannot be
    read, text that is not JSON, or JSON that is not a usable schema."""
    inline = value.lstrip().startswith("{")
    where = "text" if inline else value
    # The text as given: the line and column of a JSON error point into what the user wrote.
    schema = _parse(value if inline else _read(value), where)
    if not isinstance(schema, dict):
        raise CliError(f"--schema {where} is a JSON {type(schema).__name__}, not a schema object ({{...}})")
    try:
        OutputSpec(schema=schema)
    except (TypeError, ValueError) as exc:
        raise CliError(f"--schema {where}: {exc}") from None
    return schema
