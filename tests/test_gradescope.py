"""dist/autograder.zip: its layout, and a whole simulated Gradescope run validated against the spec."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest

from autograder.packaging.gradescope import (IMAGE_PACKAGES, TORCH_CPU_INDEX, TORCH_INDEX_ENV, build, image_requirements,
                                             requirement_name)
from conftest import ROOT

SCHEMA = json.loads((Path(__file__).parent / "gradescope_results.schema.json").read_text())


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("dist") / "autograder.zip")


def test_zip_layout(autograder_zip: Path) -> None:
    names = zipfile.ZipFile(autograder_zip).namelist()
    assert {"setup.sh", "run_autograder", "requirements.txt"} <= set(names)
    assert len(names) == len(set(names)), "no member twice (zipfile warns 'Duplicate name')"
    from autograder import locations
    from autograder.packaging.gradescope import package_files

    assert locations.SHIPPED_TABLE.is_file(), "the committed diagnosis table is on disk"
    copied = {arcname for _, arcname in package_files()}
    assert not copied & {"autograder/hidden/diagnosis.json", "autograder/hidden/plan.json"}, "the build writes its own"
    assert any(n.startswith("autograder/hidden/test_") for n in names)
    assert any(n.startswith("checks/test_public") for n in names)
    assert not any(n.startswith(("solutions/", "tests/", "examples/")) for n in names)
    setup = zipfile.ZipFile(autograder_zip).read("setup.sh").decode()
    assert zipfile.ZipFile(autograder_zip).getinfo("run_autograder").external_attr >> 16 & 0o111
    # The grader's own venv: the system Python is never pip-installed into (PEP 668 images refuse it).
    assert 'python3 -m venv "$VENV"' in setup and "python3 -m pip" not in setup and "--break-system-packages" not in setup
    installs = [line for line in setup.splitlines() if "pip install" in line]
    assert len(installs) == 2 and all(line.startswith('"$VENV/bin/python" -m pip install') for line in installs)
    assert f"${{{TORCH_INDEX_ENV}:-{TORCH_CPU_INDEX}}}" in setup and TORCH_CPU_INDEX.endswith("/whl/cpu")
    assert setup.rstrip().endswith('"$VENV/bin/python" -m compileall -q "$SOURCE"')  # after the installs
    run = zipfile.ZipFile(autograder_zip).read("run_autograder").decode()
    assert 'exec "$AUTOGRADER_ROOT/venv/bin/python" -m autograder.platforms.gradescope' in run


def test_zip_requirements_are_pyprojects_pins(autograder_zip: Path, tmp_path: Path) -> None:
    lines = zipfile.ZipFile(autograder_zip).read("requirements.txt").decode().splitlines()
    assert lines == image_requirements() and lines[0].startswith("torch==")  # setup.sh's grep takes the first
    assert [requirement_name(line) for line in lines] == [requirement_name(name) for name in IMAGE_PACKAGES]
    assert all("==" in line for line in lines), "every package of the image is pinned"
    broken = tmp_path / "pyproject.toml"
    broken.write_text('[project]\ndependencies = ["torch==2.13.0", "pytest==9.2.0"]\n')
    with pytest.raises(ValueError, match="hypothesis"):
        image_requirements(broken)


def simulate(autograder_zip: Path, root: Path, submission: Path | None) -> dict:
    """Lay out /autograder as Gradescope does, under ``root``, and run run_autograder."""
    with zipfile.ZipFile(autograder_zip) as bundle:
        bundle.extractall(root / "source")
    (root / "submission").mkdir()
    if submission is not None:
        for path in submission.iterdir():
            if path.suffix == ".py":
                shutil.copy(path, root / "submission" / path.name)
    (root / "results").mkdir()
    (root / "venv").symlink_to(sys.prefix)  # setup.sh's venv: this one
    script = root / "source" / "run_autograder"
    script.chmod(0o755)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "PYTHONPATH": ""}
    done = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(results, SCHEMA)
    return results


def test_simulated_run_grades_the_solution(autograder_zip: Path, tmp_path: Path) -> None:
    results = simulate(autograder_zip, tmp_path, ROOT / "solutions")
    assert results["score"] == 90
    numbers = [t["number"] for t in results["tests"]]
    assert numbers[0] == "1.1" and "4" in numbers
    assert all(t["visibility"] in ("visible", "after_due_date") for t in results["tests"])
    gpu_row = next(t for t in results["tests"] if t["number"] == "4")
    assert gpu_row["output"].startswith("Gradescope has no GPU.")  # built for Gradescope: it may say so


def test_simulated_run_with_empty_submission_still_writes_results(autograder_zip: Path, tmp_path: Path) -> None:
    results = simulate(autograder_zip, tmp_path, None)
    assert results["score"] == 0
    assert "loss_scaler.py is missing" in json.dumps(results)


def test_a_failing_public_example_shows_before_the_due_date(autograder_zip: Path, tmp_path: Path) -> None:
    """Clipping before unscale_ fails a public example of hidden row 2.7: a visible row says so at once.

    Gradescope shows only "visible" rows before the due date; the companion row scores nothing (2.7 keeps its
    points) and carries the public example's message alone (no hidden input).
    """
    from autograder.diagnosis.table import load_catalogue

    catalogue = load_catalogue()
    (entry,) = [e for e in catalogue.ENTRIES if e.name == "clip_before_unscale"]
    results = simulate(autograder_zip, tmp_path, catalogue.materialize(entry, tmp_path / "bug"))
    hidden = [t for t in results["tests"] if t.get("number") == "2.7"]
    assert [(t["visibility"], t["status"], t["max_score"]) for t in hidden] == [("after_due_date", "failed", 3)]
    shown = [t for t in results["tests"] if t["visibility"] == "visible" and t.get("status") == "failed"]
    assert len(shown) == 1, [t["output"][:300] for t in shown][:2]
    (part,) = shown
    assert part["name"].startswith("2.7 ") and "public examples" in part["name"]
    assert (part["score"], part["max_score"], "number" in part) == (0.0, 0.0, False)
    assert "fix these first" in part["output"] and "unscale_" in part["output"]
    assert results["tests"][results["tests"].index(part) - 1] == hidden[0], "right after its row"
    assert part["output"].split("\n\n", 1)[1] in hidden[0]["output"], "the part repeats the row's public messages"
    assert results["score"] == sum(t["score"] for t in results["tests"])


def test_hidden_inputs_in_a_failure_text_stay_in_hidden_rows(autograder_zip: Path, tmp_path: Path) -> None:
    """Row 1.16's public example fails in a call built from the student's own answer (made live, after the call
    plan's batches) with a message naming the hidden inputs its process saw (tests/attacks.py).  Its companion row
    shows at once, so the example runs in a process that served nothing hidden: the hidden inputs stay in 1.16."""
    from attacks import TELLERS

    files, marker = TELLERS["tells_in_a_public_example"]
    (tmp_path / "submission").mkdir()
    for name, text in files.items():
        (tmp_path / "submission" / name).write_text(text)
    (tmp_path / "root").mkdir()
    results = simulate(autograder_zip, tmp_path / "root", tmp_path / "submission")
    assert [t.get("number") for t in results["tests"] if marker in t["output"]] == ["1.16"]  # no companion row
    (part,) = [t for t in results["tests"] if t["visibility"] == "visible" and t["name"].startswith("1.16 ")]
    assert "_growth_tracker" in part["output"], "the public example failed, on its own inputs"
    assert marker not in part["output"] and marker not in results["output"]
