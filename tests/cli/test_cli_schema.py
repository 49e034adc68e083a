"""``yiemagent run --schema FILE|JSON``: the output printed as JSON on stdout (a file or the
schema as text), after tools and a refused first answer; in ``--json`` output; with the
embedded model by default in the grammar mode; and a schema that cannot be used refused in one
line with exit 2 before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from cli_helpers import run_cli, script_file, tools_folder

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


def answer(args: object) -> dict[str, object]:
    return {"tool_calls": [{"name": "final_answer", "arguments": args}]}


def test_the_output_is_printed_as_json_from_a_schema_file(tmp_path: Path) -> None:
    schema = tmp_path / "person.json"
    schema.write_text(json.dumps(PERSON), encoding="utf-8")
    script = script_file(
        tmp_path / "r.json", [answer({"name": "Ada", "age": "36"}), answer({"name": "Ada", "age": 36})]
    )
    done = run_cli(
        "run", "Who is Ada?", "--model", f"scripted:{script}", "--schema", str(schema), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"name": "Ada", "age": 36}


def test_tools_first_then_the_output_with_the_schema_as_text(tmp_path: Path) -> None:
    tools = tools_folder(tmp_path / "tools")
    replies = [
        {"tool_calls": [{"name": "echo", "arguments": {"text": "Ada 36"}}]},
        answer({"name": "Ada", "age": 36}),
    ]
    script = script_file(tmp_path / "r.json", replies)
    done = run_cli(
        "run", "Who is Ada?", "--model", f"scripted:{script}", "--tools", str(tools),
        "--schema", json.dumps(PERSON), "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["output"] == {"name": "Ada", "age": 36}
    assert printed["stop_reason"] == "stop"


def test_spent_retries_exit_1_saying_why(tmp_path: Path) -> None:
    script = script_file(tmp_path / "r.json", [answer({"name": 1})] * 3)
    done = run_cli(
        "run", "Who?", "--model", f"scripted:{script}", "--schema", json.dumps(PERSON), cwd=tmp_path
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "No valid output after 3 attempts" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ("missing.json", "--schema missing.json: cannot read"),
        ('{"type": ', "--schema text is not JSON: Expecting value at line 1, column 10"),
        ('{"type": 3}', "--schema text: output_schema is not a valid JSON Schema"),
        ('{"a": NaN}', "--schema text is not JSON: NaN is not JSON"),
        ('{"type": "object", "$ref": "#"}', "--schema text: output_schema refers to itself without end"),
    ],
)
def test_a_schema_that_cannot_be_used_is_one_line_and_exit_2(tmp_path: Path, schema: str, says: str) -> None:
    script = script_file(tmp_path / "r.json", ["never asked"])
    done = run_cli("run", "Who?", "--model", f"scripted:{script}", "--schema", schema, cwd=tmp_path)
    assert done.returncode == 2
    assert says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""


def test_a_schema_file_holding_a_list_is_refused(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text("[1]", encoding="utf-8")
    done = run_cli("run", "Who?", "--model", "scripted:x", "--schema", "s.json", cwd=tmp_path)
    assert done.returncode == 2 and "is a JSON list, not a schema object" in done.stderr


def test_an_output_mode_without_a_schema_is_refused(tmp_path: Path) -> None:
    done = run_cli("run", "Who?", "--model", "scripted:x", "--output-mode", "native", cwd=tmp_path)
    assert done.returncode == 2 and "give --schema too" in done.stderr


@pytest.mark.timeout(300)
@pytest.mark.needs("local")
def test_the_embedded_model_answers_a_schema_in_the_grammar_mode_by_default(tmp_path: Path) -> None:
    city = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "population": {"type": "integer"},
            "size": {"type": "string", "enum": ["small", "medium", "large"]},
        },
        "required": ["name", "population", "size"],
        "additionalProperties": False,
    }
    done = run_cli("run", "Describe Paris as data.", "--schema", json.dumps(city), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    jsonschema.validate(json.loads(done.stdout), city)
