"""Reading and writing conformance scenarios: JSON files checked against the shipped schema and
against the few rules a schema cannot state. A bad file raises ``ScenarioError`` naming the file
and the JSON path of every bad field (``$.tools[0].outcome``), never a bare traceback.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import jsonschema.exceptions
import referencing

from yiemagent.core._tools import compile_schema_validator
from yiemagent.errors import ScenarioError

from ._files import FileProblem, parse_json, read_text

__all__ = [
    "FORMAT",
    "Scenario",
    "ScenarioError",
    "dump_scenario",
    "find_scenarios",
    "json_path",
    "load_scenario",
    "parse_scenario",
    "schema",
    "schema_text",
    "validation_problems",
]

FORMAT = 2
SCHEMA_FILES = {
    "scenario": "scenario.schema.json",
    "trace": "trace.schema.json",
    "cassette": "cassette.schema.json",
}
_BASE = "https://yiemagent.invalid/parity/"

Problem = tuple[str, str]  # (JSON path, message)
MAX_PROBLEMS_SHOWN = 20  # a file of a million bad lines is reported in a screenful


def schema_text(name: str) -> str:
    """The text of the shipped JSON Schema ``name`` (``"scenario"`` or ``"trace"``)."""
    folder = resources.files("yiemagent.testing.parity") / "schemas"
    return (folder / SCHEMA_FILES[name]).read_text(encoding="utf-8")


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """The shipped JSON Schema ``name`` as data (cached: do not change it)."""
    data: dict[str, Any] = json.loads(schema_text(name))
    return data


@functools.cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    """The validator for ``name``: a shipped schema, or ``"expect"`` (a scenario's expected
    outcome alone)."""
    registry: referencing.Registry[Any] = referencing.Registry().with_resources(
        (_BASE + file, referencing.Resource.from_contents(schema(key))) for key, file in SCHEMA_FILES.items()
    )
    if name == "expect":
        ref = {"$ref": _BASE + SCHEMA_FILES["scenario"] + "#/$defs/expect"}
        return jsonschema.Draft202012Validator(ref, registry=registry)
    return jsonschema.Draft202012Validator(schema(name), registry=registry)


def json_path(parts: Iterable[Any]) -> str:
    """A JSON path like ``$.tools[0].outcome`` for a sequence of keys and indexes."""
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def validation_problems(data: Any, name: str = "scenario", prefix: Sequence[Any] = ()) -> list[Problem]:
    """Every way ``data`` breaks the schema ``name`` (``"scenario"``, ``"trace"`` or
    ``"expect"``), as ``(json_path, message)`` sorted by path; for alternatives (``oneOf``) the
    most relevant failure is reported."""
    problems: set[Problem] = set()
    try:
        for error in _validator(name).iter_errors(data):
            best = jsonschema.exceptions.best_match([error]) or error
            message = best.message if len(best.message) <= 300 else best.message[:300] + "…"
            problems.add((json_path([*prefix, *best.absolute_path]), message))
    except RecursionError:  # jsonschema recurses; the readers already bound the depth
        problems.add((json_path(prefix), "nested too deeply to check"))
    return sorted(problems)


@attrs.frozen
class Scenario:
    """A validated scenario: ``data`` is the file's JSON (read it through the properties, which
    apply the defaults) and ``path`` the file it came from, if any."""

    data: dict[str, Any]
    path: Path | None = None

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def source(self) -> str:
        return str(self.path) if self.path is not None else f"<scenario {self.name}>"

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.data.get("tools", []))

    @property
    def hooks(self) -> dict[str, list[dict[str, Any]]]:
        hooks = self.data.get("hooks", {})
        return {"before": list(hooks.get("before", [])), "after": list(hooks.get("after", []))}

    @property
    def inputs(self) -> list[dict[str, Any]]:
        return list(self.data["inputs"])

    @property
    def replies(self) -> list[dict[str, Any]]:
        return list(self.data["replies"])

    @property
    def history(self) -> list[dict[str, Any]]:
        return list(self.data.get("history", []))

    @property
    def expect(self) -> dict[str, list[dict[str, Any]]]:
        return dict(self.data["expect"])

    def setting(self, key: str) -> Any:
        """A top-level setting, with the schema's default when the file leaves it out."""
        if key in self.data:
            return self.data[key]
        return schema("scenario")["properties"][key].get("default")

    @property
    def suite(self) -> str:
        """The version of the suite the scenario belongs to (its folder's ``VERSION``)."""
        return suite_version(str(self.path.parent) if self.path is not None else None)

    @property
    def profile(self) -> list[str]:
        """``["core"]``, or the extensions of the design the scenario needs."""
        return list(self.data["profile"])

    def supplied_texts(self) -> list[str]:
        """The texts the scenario's own behaviours supply (a block reason, a tool's, hook's or
        model's failure message, a validator's rejection): an implementation must carry each
        one into the error result it makes, whatever its own wording around it."""
        texts: list[Any] = list(self.data.get("error_texts", []))
        file_tools = [f["tool"] for f in self.data.get("tool_files", []) if "tool" in f]
        for tool in [*self.tools, *self.data.get("other_store", []), *file_tools]:
            texts += [tool["outcome"].get("fail"), (tool.get("prepare") or {}).get("fail")]
            texts.append((tool.get("validate") or {}).get("reject"))
        for behaviour in self.code_placeholders():
            texts += [behaviour.get("fail"), behaviour.get("reject")]
        for rules in self.hooks.values():
            for rule in rules:
                block = rule.get("block")
                texts += [rule.get("fail"), block if isinstance(block, str) else None]
        texts += [reply.get("fail") for reply in self.replies]
        return sorted({t for t in texts if isinstance(t, str) and t})

    def code_placeholders(self) -> list[dict[str, Any]]:
        """The behaviours of the ``{"$code": behaviour}`` placeholders in the replies' calls."""
        found: list[dict[str, Any]] = []
        for reply in self.replies:
            for call in reply.get("message", {}).get("tool_calls", []):
                try:
                    args = json.loads(call["function"]["arguments"])
                except ValueError:
                    continue
                if isinstance(args, dict):
                    found += [
                        v["$code"]
                        for v in args.values()
                        if isinstance(v, dict) and isinstance(v.get("$code"), dict)
                    ]
        return found

    def known_ids(self) -> set[str]:
        """The tool-call ids the scenario gives: in its replies and its history."""
        ids = {c["id"] for r in self.replies for c in r.get("message", {}).get("tool_calls", []) if "id" in c}
        for msg in self.history:
            ids.update(c["id"] for c in msg.get("tool_calls", []))
            if msg.get("role") == "toolResult":
                ids.add(msg["tool_call_id"])
        return ids

    def tool_is_parallel(self, name: str) -> bool | None:
        """Whether the scenario's tool ``name`` may run in parallel; ``None`` if it has none."""
        for tool in self.tools:
            if tool["name"] == name:
                return bool(tool.get("parallel", False))
        return None


def _steps(data: Mapping[str, Any]) -> Iterator[tuple[list[Any], dict[str, Any]]]:
    """Every step in the scenario with its path."""
    for i, tool in enumerate(data.get("tools", [])):
        for j, step in enumerate(tool.get("steps", [])):
            yield ["tools", i, "steps", j], step
    for kind in ("before", "after"):
        for i, rule in enumerate(data.get("hooks", {}).get(kind, [])):
            for j, step in enumerate(rule.get("steps", [])):
                yield ["hooks", kind, i, "steps", j], step
    for i, reply in enumerate(data.get("replies", [])):
        for j, step in enumerate(reply.get("steps", [])):
            yield ["replies", i, "steps", j], step


def _schemas(data: Mapping[str, Any]) -> Iterator[tuple[list[Any], Any]]:
    """Every JSON Schema a scenario gives, with its path: the tools' and the tool files' input
    schemas, and the output's schema."""
    for i, tool in enumerate(data.get("tools", [])):
        yield ["tools", i, "input_schema"], tool.get("input_schema", {"type": "object"})
    for i, file in enumerate(data.get("tool_files", [])):
        if isinstance(file.get("tool"), Mapping) and "input_schema" in file["tool"]:
            yield ["tool_files", i, "tool", "input_schema"], file["tool"]["input_schema"]
    output = data.get("output")
    if isinstance(output, Mapping) and "schema" in output:
        yield ["output", "schema"], output["schema"]


def _schema_problem(input_schema: Any) -> str | None:
    """Why a schema of the scenario (a tool's ``input_schema``, the output's ``schema``) is not
    one the library can use, or ``None``: the library's own check, as for a schema from an MCP
    server, since a scenario (or a cassette captured into one) comes from outside. A pattern RE2
    cannot run in linear time is refused here, so it is never matched with Python's ``re``."""
    try:
        compile_schema_validator(None, input_schema, untrusted=True)
    except ValueError as exc:
        return str(exc)
    except RecursionError:
        return "nested too deeply to check"
    return None


def _rule_problems(data: Mapping[str, Any], stem: str | None) -> list[Problem]:
    """The rules the schema cannot state: names, references between parts, unique ids."""
    problems: list[Problem] = []
    if stem is not None and data["name"] != stem:
        problems.append(("$.name", f"{data['name']!r} must equal the file name {stem!r}"))
    tools = data.get("tools", [])
    # A name may be given twice only as an available tool and a later one (with "available":
    # false) that a call registers in its place.
    keys = [(t["name"], t.get("available", True) is not False) for t in tools]
    for i, key in enumerate(keys):
        if key in keys[:i]:
            problems.append((json_path(["tools", i, "name"]), f"tool {key[0]!r} is defined twice"))
    files = [f["file"] for f in data.get("tool_files", [])]
    for i, file in enumerate(files):
        if file in files[:i]:
            problems.append((json_path(["tool_files", i, "file"]), f"tool file {file!r} is given twice"))
        if data.get("write_tool") and file == "writetool":
            problems.append((json_path(["tool_files", i, "file"]), "writeTool's own file takes that name"))
    prepare = data.get("prepare_context") or {}
    everything = {t["name"] for t in tools} | {
        f["tool"]["name"] for f in data.get("tool_files", []) if "tool" in f
    }
    for j, name in enumerate(prepare.get("hide_tools", [])):
        if name not in everything and name not in ("listTools", "writeTool"):
            problems.append((json_path(["prepare_context", "hide_tools", j]), f"no tool is named {name!r}"))
    for path, schema in _schemas(data):
        problem = _schema_problem(schema)
        if problem is not None:
            problems.append((json_path(path), problem))
    later = {t["name"] for t in tools if t.get("available") is False}
    for i, tool in enumerate(tools):
        for j, name in enumerate(tool["outcome"].get("register", [])):
            if name not in later:
                problems.append(
                    (
                        json_path(["tools", i, "outcome", "register", j]),
                        f'{name!r} is not a tool with "available": false',
                    )
                )
    steps = list(_steps(data))
    released = {s["latch"] for _, s in steps if s["do"] == "release"}
    released |= {i["latch"] for i in data.get("inputs", []) if i["do"] == "release"}
    reached = {s["point"] for _, s in steps if s["do"] == "reach"}
    for path, step in steps:
        if step["do"] == "wait" and step["latch"] not in released:
            problems.append((json_path(path), f"latch {step['latch']!r} is never released"))
    for i, item in enumerate(data.get("inputs", [])):
        at = item.get("at")
        if isinstance(at, str) and at not in reached:
            problems.append((json_path(["inputs", i, "at"]), f"no step reaches point {at!r}"))
    seen: set[str] = set()
    for i, reply in enumerate(data.get("replies", [])):
        for j, call in enumerate(reply.get("message", {}).get("tool_calls", [])):
            call_id = call.get("id")
            if call_id is None:
                continue
            if call_id in seen or call_id.startswith("<"):
                problems.append(
                    (
                        json_path(["replies", i, "message", "tool_calls", j, "id"]),
                        f"tool-call id {call_id!r} is used twice or looks like a placeholder",
                    )
                )
            seen.add(call_id)
    return problems


def parse_scenario(data: Any, source: str = "<scenario>", stem: str | None = None) -> Scenario:
    """Check ``data`` against the schema and the cross-reference rules; return the
    ``Scenario`` or raise ``ScenarioError`` naming ``source`` and every bad field."""
    problems = validation_problems(data)
    if problems:
        raise ScenarioError(source, problems)
    problems = _rule_problems(data, stem)
    if problems:
        raise ScenarioError(source, problems)
    return Scenario(data)


def load_scenario(path: str | Path) -> Scenario:
    """Read and check one scenario file; raises ``ScenarioError`` naming the file for anything
    that makes it unusable (see ``files``: not a regular file, over the size limit, not UTF-8,
    not JSON, too deep, an unsafe number), never a bare ``OSError`` or ``ValueError``."""
    file = Path(path)
    try:
        text = read_text(file)
        if not text.strip():
            raise FileProblem(
                "the file is empty; a scenario is a JSON object (see "
                "python -m yiemagent.parity schema scenario)"
            )
        data = parse_json(text)
    except FileProblem as exc:
        raise ScenarioError(str(file), [(exc.where, str(exc))]) from None
    scenario = parse_scenario(data, str(file), file.stem)
    return attrs.evolve(scenario, path=file)


SUITE_VERSION_FILE = "VERSION"


@functools.cache
def suite_version(folder: str | None = None) -> str:
    """The suite's version (``MAJOR.MINOR.PATCH``): the ``VERSION`` file of ``folder`` (the
    scenario folder), else of the suite shipped with this checkout; ``"0.0.0"`` when neither has
    one. A new scenario raises the minor number, a changed expectation the major one."""
    candidates = [Path(folder)] if folder else []
    candidates.append(Path(__file__).resolve().parents[3] / "parity" / "scenarios")
    for candidate in candidates:
        try:
            text = (candidate / SUITE_VERSION_FILE).read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", text):
            return text
    return "0.0.0"


def find_scenarios(paths: Iterable[str | Path]) -> list[Path]:
    """The scenario files named by ``paths``: files as given, directories' ``*.json`` files in
    sorted order. Raises ``FileNotFoundError`` for a path that does not exist."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(path.glob("*.json")))
        elif path.exists():
            found.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such scenario file or directory")
    return found


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _dump_row(row: Any, indent: int) -> str:
    """One item of a list on its own line."""
    return _compact(row)


def _dump_rows(rows: Sequence[Any], indent: int) -> str:
    """A list with one compact JSON value per line (a list of plain values stays on one line):
    scenarios and traces read and diff better that way."""
    if not rows or not any(isinstance(r, (dict, list)) for r in rows):
        return json.dumps(list(rows), ensure_ascii=False)
    pad = " " * (indent + 2)
    body = ",\n".join(pad + _dump_row(r, indent + 2) for r in rows)
    return "[\n" + body + "\n" + " " * indent + "]"


def _dump_value(value: Any, indent: int) -> str:
    if isinstance(value, list):
        return _dump_rows(value, indent)
    if isinstance(value, Mapping) and value and all(isinstance(v, list) for v in value.values()):
        pad = " " * (indent + 2)
        inner = ",\n".join(f"{pad}{json.dumps(k)}: {_dump_rows(v, indent + 2)}" for k, v in value.items())
        return "{\n" + inner + "\n" + " " * indent + "}"
    return _compact(value)


def dump_scenario(data: Mapping[str, Any]) -> str:
    """The text of a scenario file: each top-level field on its own line, its lists (and those of
    ``hooks`` and ``expect``) one compact item per line."""
    parts = [f"  {json.dumps(key)}: {_dump_value(value, 2)}" for key, value in data.items()]
    return "{\n" + ",\n".join(parts) + "\n}\n"
