"""The Ray integration stays optional: ``import yiemagent`` (and the session stores and event
dicts, which need neither) never imports Ray or redis, and ``yiemagent.integrations.ray`` does not
shadow the ``ray`` package."""

from __future__ import annotations

import subprocess
import sys

import pytest


def imported_after(code: str) -> set[str]:
    """The top-level module names a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return set(done.stdout.split())


def test_import_yiemagent_does_not_import_ray_or_redis() -> None:
    loaded = imported_after(
        "import yiemagent, yiemagent.integrations._session_store, yiemagent.integrations._event_wire"
    )
    assert "yiemagent" in loaded
    assert "ray" not in loaded and "redis" not in loaded


@pytest.mark.needs("ray")
def test_ray_cluster_does_not_shadow_ray() -> None:
    code = (
        "import yiemagent.integrations.ray, ray, os\n"
        "assert os.sep + 'yiemagent' + os.sep not in ray.__file__, ray.__file__\n"
        "assert hasattr(ray, 'remote')"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
