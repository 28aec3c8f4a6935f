"""The notebook edition (``assignment/amp_homework.ipynb``, built by ``make notebook``).

* it is up to date with its sources (handout, solutions, rubric) and its task cells hold
  exactly ``assignment/*.py`` (student) and ``solutions/*.py`` (solution notebook);
* executed on CPU with nbclient, the student notebook's public checks fail, and the
  solution notebook (the student notebook with the solutions filled in) runs end to end
  with every check passing;
* its export zip gets the same score from ``python -m autograder grade`` and from
  ``otter run`` with the otter autograder (the notebook route is the ``.py`` route).

Skipped when otter-grader / nbclient are not installed (``pip install -e ".[otter]"``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("otter", reason='otter-grader is not installed: pip install -e ".[otter]"')
nbclient = pytest.importorskip("nbclient", reason='nbclient is not installed: pip install -e ".[otter]"')
nbformat = pytest.importorskip("nbformat", reason='nbformat is not installed: pip install -e ".[otter]"')

from autograder.packaging import notebook_build, otter_build  # noqa: E402
from autograder.engine import rubric
from conftest import ROOT, grade, load_results  # noqa: E402

SHIPPED = ROOT / "assignment" / notebook_build.NOTEBOOK
#: otter's prompt + marker lines of a solution cell, which stand for the source's "# BEGIN SOLUTION".
PROMPT = re.compile(r'^( *)""" # BEGIN PROMPT\n.*\n *""" # END PROMPT\n *# BEGIN SOLUTION NO PROMPT$', re.MULTILINE)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A fresh build: the student and the solution notebook, and the bridge written next to the student one."""
    out = tmp_path_factory.mktemp("notebook")
    done = subprocess.run([sys.executable, "-m", "autograder.packaging.notebook_build", "--out", str(out / "student.ipynb"),
                           "--solution", str(out / "solution.ipynb")], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    notebooks = {name: nbformat.read(out / f"{name}.ipynb", as_version=4) for name in ("student", "solution")}
    return {**notebooks, "bridge": (out / otter_build.BRIDGE_NAME).read_bytes()}


def _execute(nb: Any, folder: Path) -> Any:
    """Run ``nb`` in a copy of the assignment folder (where its %%writefile cells write)."""
    shutil.copytree(ROOT / "assignment", folder, ignore=shutil.ignore_patterns("__pycache__"))
    nbformat.write(nb, folder / notebook_build.NOTEBOOK)
    nb = nbformat.read(folder / notebook_build.NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(folder)}})
    client.execute()
    return nb


def _text(cell: Any) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            parts.append(output["text"])
        elif output["output_type"] in ("execute_result", "display_data"):
            parts.append(output["data"].get("text/plain", ""))
        elif output["output_type"] == "error":
            parts.append(f"ERROR {output['ename']}: {output['evalue']}")
    return "".join(parts)


def _checks(nb: Any) -> dict[str, str]:
    found = {}
    for cell in nb.cells:
        match = re.fullmatch(r'grader\.check\("(\w+)"\)', cell.source.strip()) if cell.cell_type == "code" else None
        if match:
            found[match.group(1)] = _text(cell)
    return found


def test_shipped_notebook_is_up_to_date(built: dict[str, Any]) -> None:
    assert SHIPPED.is_file(), "run make notebook"
    assert nbformat.read(SHIPPED, as_version=4) == built["student"], "stale notebook: run make notebook"
    # The module its test files load (by SHA-256) ships next to it, as the build writes it.
    shipped_bridge = SHIPPED.parent / otter_build.BRIDGE_NAME
    assert shipped_bridge.is_file(), "run make notebook"
    assert shipped_bridge.read_bytes() == built["bridge"] == otter_build.bridge_source(public=True), \
        "stale bridge: make notebook"


def test_the_install_cell_comes_before_otter_is_imported(built: dict[str, Any]) -> None:
    """A hosted notebook has no otter: the first code cell installs the grader's pins, then otter's init cell."""
    code = [cell.source for cell in built["student"].cells if cell.cell_type == "code"]
    assert "import otter" not in code[0] and "import otter" in code[1]
    for pin in ("torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu", "pytest==9.2.0",
                "hypothesis==6.168.5", "otter-grader==7.0.0"):
        assert pin in code[0], pin
    assert built["student"].cells[0].cell_type == "markdown" and "pip install" in built["student"].cells[0].source


def test_task_cells_are_the_release_and_the_solutions(built: dict[str, Any]) -> None:
    student = notebook_build.task_cells(built["student"])
    solution = notebook_build.task_cells(built["solution"])
    assert sorted(student) == sorted(solution) == sorted(notebook_build.TASK_FILES.values())
    for name in student:
        assert student[name].rstrip("\n") == (ROOT / "assignment" / name).read_text().rstrip("\n"), name
        original = (ROOT / "solutions" / name).read_text().rstrip("\n")
        assert PROMPT.sub(r"\1# BEGIN SOLUTION", solution[name]).rstrip("\n") == original, name
    # Apart from the task cells, the solution notebook is the student notebook.
    others = [[c.source for c in built[nb].cells if "%%writefile" not in c.source] for nb in ("student", "solution")]
    assert others[0] == others[1]
    tests = built["student"].metadata["otter"]["tests"]  # otter_build's public test files: loaders of the bridge
    digest = hashlib.sha256(otter_build.bridge_source(public=True)).hexdigest()
    assert all(f'AMP_BRIDGE = ("amp_otter_bridge.py", "{digest}")' in text for text in tests.values())
    assert all("def judge_results(" not in text for text in tests.values())
    assert all(len(re.sub(r"\nAMP_WORDS = \{\n.*?\n\}\n", "\n", text, flags=re.DOTALL).splitlines()) < 100
               for text in tests.values())  # its words aside, a small loader
    assert all(", True, " not in text.split("AMP_ROWS = [", 1)[1] for text in tests.values())  # no hidden row
    for task, (question, _) in otter_build.QUESTIONS.items():  # the real task points, not the public rows' sum
        worth = sum(item.points for item in rubric.ITEMS if item.task == task)
        assert f"the task is worth {worth:g} points" in tests[question], (question, tests[question][:300])


@pytest.mark.slow
def test_checks_fail_before_and_pass_after_the_solution(built: dict[str, Any], tmp_path: Path) -> None:
    before = _execute(built["student"], tmp_path / "student")
    checks = _checks(before)
    assert set(checks) == {"q_scaler", "q_amp_step"}  # Task 3 has no public check
    for question, text in checks.items():
        assert "❌" in text and "All test cases passed" not in text, (question, text[:2000])
        # (otter shows the first lines of each failure here, now the runnable snippet; that the skeleton's
        # failures name its NotImplementedError is asserted on the full text in tests/test_public_checks.py)

    after = _execute(built["solution"], tmp_path / "solution")
    for question, text in _checks(after).items():
        assert "All test cases passed!" in text, (question, text[:3000])
    errors = [(c.source[:80], _text(c)) for c in after.cells
              if any(o["output_type"] == "error" for o in c.get("outputs", []))]
    assert not errors, errors
    outputs = "\n".join(_text(c) for c in after.cells if c.cell_type == "code")
    assert "F.mse_loss(h, t)" in outputs and "float32" in outputs  # the dtype table
    assert "exactly zero from step 33" in outputs  # the underflow demo
    assert any("image/png" in o.get("data", {}) for c in after.cells for o in c.get("outputs", []))  # its plot
    assert "your ToyLossScaler + amp_step" in outputs
    assert "No CUDA GPU here" in outputs or "faster" in outputs

    # The export zip is graded like any .py submission, by our grader and by otter's.
    exported = sorted((tmp_path / "solution").glob("amp_homework_*.zip"))
    assert len(exported) == 1, "the export cell made no zip"
    graded = grade([exported[0]], tmp_path / "graded")
    assert graded.returncode == 0, graded.stderr[-3000:]
    ours = load_results(tmp_path / "graded", exported[0].stem)
    assert ours["score"] == 90.0, ours
    built_zip = subprocess.run([sys.executable, "-m", "autograder.packaging.otter_build", "--out", str(tmp_path / "otter.zip")],
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert built_zip.returncode == 0, built_zip.stderr[-3000:]
    command = [sys.executable, "-m", "otter", "run", "-a", str(tmp_path / "otter.zip"), "-o", str(tmp_path),
               "--no-logo", str(exported[0])]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900,
                         env=otter_build.otter_env())
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    theirs = json.loads((tmp_path / "results.json").read_text())
    assert sum(t.get("score", 0) or 0 for t in theirs["tests"]) == pytest.approx(ours["score"])
