"""The installed package type-checks from outside the checkout: mypy finds it and its types."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_code_outside_the_checkout_type_checks_against_the_installed_package(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text(
        "from yiemagent import AssistantMessage, YiemAgent\n"
        "agent = YiemAgent(llm_call=lambda request: AssistantMessage([]))\n"
        "reply: AssistantMessage = agent.prompt('hi', timeout=1)\n",
        encoding="utf-8",
    )
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from yiemagent import AssistantMessage, YiemAgent\n"
        "agent = YiemAgent(llm_call=lambda request: AssistantMessage([]))\n"
        "reply: int = agent.prompt('hi', timeout=1)\n",
        encoding="utf-8",
    )
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental"]
    ok = subprocess.run([*command, str(good)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout
    wrong = subprocess.run([*command, str(bad)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert wrong.returncode == 1 and 'has type "AssistantMessage"' in wrong.stdout, wrong.stdout
