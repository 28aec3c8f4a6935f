"""make prairielearn: the question folder, the image definition, and the entrypoint under PrairieLearn's /grade layout.

The entrypoint's results.json is validated against ``prairielearn_results.schema.json``, written from
PrairieLearn's documentation of external grading (its description cites the page).  The image's install
steps, in a fresh Debian root, are ``test_prairielearn_image.py``'s (slow).
"""

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

from autograder.engine import rubric
from autograder.packaging import prairielearn as packaging
from autograder.platforms.prairielearn import prairielearn_results
from conftest import ROOT

SCHEMA = json.loads((Path(__file__).parent / "prairielearn_results.schema.json").read_text())
CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")
#: externalGradingOptions' documented keys (PrairieLearn: docs/externalGrading.md and the info.json schema).
DOCUMENTED_OPTIONS = {"image", "entrypoint", "serverFilesCourse", "timeout", "enableNetworking", "environment"}
WITHHELD = "are not shown here (they would show the hidden inputs)"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return packaging.build(tmp_path_factory.mktemp("dist") / "prairielearn", image="someone/amp-grader:1")


def lay_out(question: Path, root: Path, submission: Path | None, files: tuple[str, ...] = CONTRACT) -> Path:
    """PrairieLearn's /grade under ``root``: the question's tests/, the uploaded files, data.json; no results/."""
    shutil.copytree(question / "tests", root / "tests", symlinks=True)
    (root / "student").mkdir(parents=True)
    for name in files if submission is not None else ():
        shutil.copy(submission / name, root / "student" / name)
    (root / "data").mkdir()
    (root / "data" / "data.json").write_text(json.dumps({"params": {}, "submitted_answers": {}}))
    return root


def run_entrypoint(root: Path, venv: str = sys.prefix) -> dict:
    """Run the question's entrypoint as PrairieLearn does (chmod +x, then run it); return the validated results."""
    entry = root / "tests" / "run_grader"
    entry.chmod(0o755)
    env = {**os.environ, "AMP_GRADE_ROOT": str(root), "AMP_GRADER_VENV": venv}
    done = subprocess.run([str(entry)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    path = root / "results" / "results.json"
    assert path.stat().st_size < 2**20, "PrairieLearn limits results.json to 1 MB"
    results = json.loads(path.read_text())
    jsonschema.validate(results, SCHEMA)
    return results


def test_question_folder_is_course_ready(built: Path) -> None:
    question = built / "questions" / packaging.QUESTION
    info = json.loads((question / "info.json").read_text())
    assert info["type"] == "v3" and info["gradingMethod"] == "External"
    assert len(info["uuid"]) == 36 and info["uuid"] == packaging.info_json("x")["uuid"]  # the same on every build
    options = info["externalGradingOptions"]
    assert set(options) <= DOCUMENTED_OPTIONS
    assert options["image"] == "someone/amp-grader:1" and options["enableNetworking"] is False
    assert options["entrypoint"] == "/grade/tests/run_grader"
    assert isinstance(options["timeout"], int) and 300 < options["timeout"] <= 600  # past the 300 s budget, within PL's cap
    html = (question / "question.html").read_text()
    assert '<pl-file-upload file-names="loss_scaler.py, amp_step.py, answers.py"></pl-file-upload>' in html
    assert "<pl-external-grader-results></pl-external-grader-results>" in html
    assert os.access(question / "tests" / "run_grader", os.X_OK)
    source = question / "tests" / "source"
    assert (source / "autograder" / "platforms" / "prairielearn.py").is_file()
    assert sorted(p.name for p in (source / "autograder" / "hidden").glob("test_hidden_*.py")) == [
        "test_hidden_amp_step.py", "test_hidden_quick_check.py", "test_hidden_scaler.py"]
    assert not list(built.rglob("solutions")) and not (source / "tests").exists()
    # What students may download holds the handout and the skeleton, never a hidden test or the grader.
    starter = zipfile.ZipFile(question / "clientFilesQuestion" / packaging.STARTER).namelist()
    assert {"amp_homework/README.md", "amp_homework/loss_scaler.py", "amp_homework/checks/test_public_scaler.py"} <= set(starter)
    assert not any("hidden" in name or name.startswith("amp_homework/autograder") for name in starter)


def test_image_is_prairielearns_python_grader_with_cpu_torch_pinned(built: Path) -> None:
    dockerfile = (built / "image" / "Dockerfile").read_text()
    assert "ARG BASE=prairielearn/grader-python:" in dockerfile and "FROM ${BASE}" in dockerfile
    assert "COPY requirements.txt install.sh /amp-autograder/" in dockerfile
    assert "RUN bash /amp-autograder/install.sh" in dockerfile
    assert "autograder" not in (built / "image" / "requirements.txt").read_text()  # no test ships in the image
    requirements = (built / "image" / "requirements.txt").read_text().splitlines()
    assert requirements[0] == "torch==2.13.0" and all("==" in line for line in requirements)
    install = (built / "image" / "install.sh").read_text()
    assert "https://download.pytorch.org/whl/cpu" in install and 'python3 -m venv "$VENV"' in install
    assert "--break-system-packages" not in install and "/venv/bin/pip" not in install  # the base's Python untouched


def test_results_show_points_of_every_row_and_no_detail_of_a_hidden_one() -> None:
    data = {
        "score": 45.0, "output": "About your submission:\n- a note",
        "tests": [
            {"name": "1.1 Constructor", "number": "1.1", "score": 3.0, "max_score": 3.0, "output": "Passed.",
             "visibility": "visible"},
            {"name": "1.6 update()", "number": "1.6", "score": 0.0, "max_score": 5.0, "visibility": "after_due_date",
             "output": "Falsifying example: growth_interval=7 (a hidden input)\nLikely mistake: off by one"},
            {"name": "GPU part", "number": "4", "score": 0.0, "max_score": 0.0, "output": "Gradescope has no GPU.",
             "visibility": "visible"},
        ],
    }
    results = prairielearn_results(data)
    jsonschema.validate(results, SCHEMA)
    assert results["gradable"] is True and results["score"] == 0.5  # 45 of the CPU part's 90
    assert [(t["name"], t["points"], t["max_points"]) for t in results["tests"]] == [
        ("1.1 Constructor", 3.0, 3.0), ("1.6 update()", 0.0, 5.0), ("GPU part", 0.0, 0.0)]
    shown = json.dumps(results)
    assert "growth_interval=7" not in shown and "off by one" not in shown and WITHHELD in shown
    assert results["tests"][0]["message"] == "Passed." and "Gradescope" not in shown
    assert "due date" not in shown  # PrairieLearn reveals nothing later: no row may promise it
    assert "a note" in results["output"]

    # A hidden row's failed public examples (inputs students already have) are shown with it; nothing else is.
    data["extra_data"] = {"public_failures": {"1.6": "[public example] growth after 2 clean steps: expected 2.0"},
                          "isolation": "namespaces"}
    row = prairielearn_results(data)["tests"][1]
    assert row["message"].startswith("A hidden test") and "growth after 2 clean steps" in row["message"]
    assert "growth_interval=7" not in row["message"] and "namespaces" not in json.dumps(prairielearn_results(data))


def test_nothing_uploaded_is_not_gradable(built: Path, tmp_path: Path) -> None:
    root = lay_out(built / "questions" / packaging.QUESTION, tmp_path / "grade", None)
    results = run_entrypoint(root)
    assert results["gradable"] is False and "Nothing was uploaded" in results["format_errors"][0]


def test_an_image_without_the_grader_is_not_gradable_with_the_reason(built: Path, tmp_path: Path) -> None:
    root = lay_out(built / "questions" / packaging.QUESTION, tmp_path / "grade", ROOT / "solutions")
    results = run_entrypoint(root, venv=str(tmp_path / "no-such-venv"))
    assert results["gradable"] is False and "not installed in this image" in results["format_errors"][0]


def test_entrypoint_grades_the_solution_under_the_grade_layout(built: Path, tmp_path: Path) -> None:
    root = lay_out(built / "questions" / packaging.QUESTION, tmp_path / "grade", ROOT / "solutions")
    results = run_entrypoint(root)
    assert results["gradable"] is True and results["score"] == 1.0, json.dumps(results)[:3000]
    assert sum(t["points"] for t in results["tests"]) == sum(t["max_points"] for t in results["tests"]) == 90
    hidden = [t for t in results["tests"] if WITHHELD in t.get("message", "")]
    rows = [item for item in rubric.ITEMS if item.points and item.task != "gpu"]  # the GPU part is staff's
    assert len(hidden) == len([item for item in rows if item.suite == rubric.HIDDEN])  # none of the public ones


def test_an_upload_that_reaches_for_the_grade_folders_gets_nothing(built: Path, tmp_path: Path) -> None:
    """The uploaded code tries to overwrite results.json and to read the hidden tests and data.json in /grade."""
    root = tmp_path / "grade"
    submission = tmp_path / "upload"
    shutil.copytree(ROOT / "solutions", submission)
    targets = {"write": root / "results" / "results.json",
               "read": root / "tests" / "source" / "autograder" / "hidden" / "test_hidden_scaler.py",
               "data": root / "data" / "data.json"}
    attack = ("import os as _os\n"
              f"for _kind, _path in {[(k, str(v)) for k, v in targets.items()]!r}:\n"
              "    try:\n"
              "        if _kind == 'write':\n"
              "            open(_path, 'w').write('{\"score\": 1.0, \"gradable\": true, \"forged\": true}')\n"
              "        else:\n"
              "            print('LEAKED', _kind, open(_path).read()[:200])\n"
              "        print('REACHED', _kind)\n"
              "    except Exception as _exc:\n"
              "        print('BLOCKED', _kind, type(_exc).__name__)\n")
    (submission / "amp_step.py").write_text((ROOT / "solutions" / "amp_step.py").read_text() + "\n" + attack)
    results = run_entrypoint(lay_out(built / "questions" / packaging.QUESTION, root, submission))
    shown = json.dumps(results)
    assert "forged" not in shown and results["gradable"] is True and results["score"] == 1.0
    assert "LEAKED" not in shown and "REACHED" not in shown and "def test_" not in shown
    assert "BLOCKED write" in shown and "BLOCKED read" in shown and "BLOCKED data" in shown
