"""A CPU student process's file view at ``namespaces`` is built from an allow-list (``autograder.sandbox.view``), as
root and as an ordinary user (in a user namespace): what it learns of the grader's paths does not exist for it.

The GPU student process's view, the same code, is proved in ``tests/test_gpu_seal.py``, with the probe used here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT
from test_gpu_seal import PEEK, hidden_from_view
from test_isolation import _expected_level, grade_as, needs, nobody_python, nobody_root, results_of  # noqa: F401


@pytest.mark.parametrize("mode", ["root", "unprivileged"])
def test_a_cpu_student_process_at_namespaces_sees_only_its_allow_list(mode: str, workspace: Path,
                                                                     request: pytest.FixtureRequest) -> None:
    needs(mode)
    python = request.getfixturevalue("nobody_python") if mode == "unprivileged" else sys.executable
    root = request.getfixturevalue("nobody_root") if mode == "unprivileged" else ROOT
    if _expected_level(mode, python) != "namespaces":
        pytest.skip("no namespaces here (an ordinary user without user namespaces): Landlock is the allow-list")
    prefixes = subprocess.run([python, "-c", "import sys; print(sys.prefix); print(sys.base_prefix)"],
                              capture_output=True, text=True, check=True).stdout.split()
    alice, secret, planted = hidden_from_view(workspace, root, [*prefixes, str(root / "assignment" / "checks")])
    try:
        done = grade_as(mode, [alice], workspace / "out", python=python, root=root,
                        env={"AMP_PLAN_CACHE": str(workspace / "plan-cache")})
    finally:
        planted.unlink()
    assert done.returncode == 0, done.stderr[-3000:]
    results = results_of(workspace / "out", "alice")
    assert results["extra_data"]["isolation"] == "namespaces"
    found = re.search(r"peek: told=([A-Z,]*) given=([A-Z,]*) own=(\w+) scratch=(\w+) :end", str(results))
    assert found, str(results)[-3000:]
    told, given, own, scratch = found.groups()
    assert set(told.split(",")) <= {"ENOENT", ""}  # whatever its command line names (the worker's files)
    assert given.split(",") == ["ENOENT"] * len(secret)
    assert (own, scratch) == ("READ", "SEEN")


@pytest.fixture
def workspace() -> Any:
    """A folder every uid may enter (pytest's own tmp folders are 0700 root), removed afterwards."""
    folder = Path("/var/tmp") / f"amp-view-test-{uuid.uuid4().hex[:8]}"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
