"""A real package: ``pip install .`` (not editable) gives a grader that grades from any folder.

The wheel holds the two packages side by side (``autograder``, with the hidden tests, and ``checks``,
the public checks) and nothing of a checkout's (solutions, tests).  Installed into a fresh
environment and run from a folder that is not the checkout, it grades ``solutions/`` to 90/90: no
``sys.path`` insertion, no file read from the checkout but the submission itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

#: Files of the two packages that grading cannot do without, as they must appear in the wheel.
REQUIRED = ("autograder/engine/grader.py", "autograder/engine/judge.ini", "autograder/hidden/test_hidden_scaler.py",
            "autograder/platforms/gradescope.py", "checks/plugin.py", "checks/runners/harness.py",
            "checks/student/serve.py", "checks/judge/behaviours.py", "checks/diagnosis.json",
            "checks/amp_effects.json", "autograder/engine/amp_reference.py", "checks/test_public_scaler.py")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the working tree, built from a copy: setuptools' build/ folder keeps files deleted since an
    earlier build, and would put them in the wheel."""
    source = tmp_path_factory.mktemp("source") / "tree"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv*", "out", "build", "dist", "*.egg-info",
                                                                  "__pycache__", ".hypothesis"))
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(source)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return next(out.glob("amp_homework-*.whl"))


def test_the_wheel_holds_both_packages_and_nothing_of_the_checkout(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(REQUIRED) <= names, sorted(set(REQUIRED) - names)
    tops = {name.split("/", 1)[0] for name in names if not name.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"autograder", "checks"}  # no solutions/, tests/, assignment/, benchmarks/


@pytest.mark.slow
def test_an_installed_grader_grades_the_solution_from_another_folder(wheel: Path, tmp_path: Path) -> None:
    """A fresh environment (this one's libraries, none of its project paths) with the wheel installed."""
    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    python = env_dir / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    # torch and friends from this environment, as a plain path: its .pth files (the editable install of the
    # checkout among them) are not processed, so `autograder` can only come from the wheel.
    (purelib / "libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
                           str(wheel)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run([str(python), "-c", "import autograder, checks; print(autograder.__file__, checks.__file__)"],
                           cwd=elsewhere, capture_output=True, text=True, timeout=120)
    assert where.returncode == 0 and str(ROOT) not in where.stdout, where.stdout + where.stderr
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AMP_PLAN_CACHE": str(tmp_path / "cache")}
    graded = subprocess.run([str(python), "-m", "autograder", "grade", str(ROOT / "solutions"), "--out", "out",
                             "--no-progress"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=900)
    assert graded.returncode == 0, graded.stdout[-2000:] + graded.stderr[-3000:]
    results = json.loads((elsewhere / "out" / "solutions" / "results.json").read_text())
    assert results["score"] == 90, graded.stdout[-2000:]
