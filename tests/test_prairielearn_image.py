"""The PrairieLearn image's install steps, in a fresh OS root, then the entrypoint under PrairieLearn's /grade layout.

The Dockerfile that ``make prairielearn`` writes is read instruction by instruction and carried out in a fresh
Debian 12 root (the machinery of ``test_gradescope_image.py``: the cached debootstrap base, chroot, this machine's
wheels): ``COPY`` copies from the image folder, ``RUN`` runs in the root.  ``FROM`` names PrairieLearn's Python
grader image, which cannot be pulled here: its stand-in is the Debian root with ``python3`` and ``python3-venv``
(the base image's part the install steps use: a Python 3 on ``PATH`` that makes virtual environments).  Then,
as PrairieLearn does for each job, ``/grade`` gets the question's ``tests/``, the uploaded files and
``data/data.json``, and the entrypoint runs as root: ``solutions/`` scores 1.0, the skeleton 0 and a
catalogued single-bug submission loses the rows of its bug, each ``results.json`` valid against the schema
written from PrairieLearn's documentation.  Needs root and debootstrap (CI runs it; marker ``image``).
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import jsonschema
import pytest

from autograder.engine import rubric
from autograder.packaging import prairielearn as packaging
from conftest import ROOT
from test_gradescope_image import (TORCH_INDEX_ENV, bind_readonly, debian_base, fresh_root, in_root,  # noqa: F401
                                   pip_index_url, sh, wheel_folders)
from test_catalogue import catalogue
from test_prairielearn import CONTRACT, SCHEMA, WITHHELD

pytestmark = [pytest.mark.image, pytest.mark.slow]
INSTALL_TIMEOUT_S = 2400
GRADE_TIMEOUT_S = 900
#: The catalogued bug graded here: it breaks the backoff's tracker reset, public row 1.5 (and what depends on it).
BUG = "tracker_not_reset_on_backoff"


def carry_out_dockerfile(image: Path, root: Path, env: dict[str, str]) -> list[str]:
    """Each instruction of ``image/Dockerfile`` in ``root`` (see the module's doc); the instructions carried out."""
    done = []
    for line in (image / "Dockerfile").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, _, rest = line.strip().partition(" ")
        if instruction in ("ARG", "FROM"):  # the base: PrairieLearn's Python grader image, stood in for by the root
            assert instruction == "ARG" or rest == "${BASE}", line
        elif instruction == "COPY":
            *sources, target = shlex.split(rest)
            destination = root / target.lstrip("/")
            destination.mkdir(parents=True, exist_ok=True)
            for source in sources:
                shutil.copy2(image / source, destination / source)
        elif instruction == "RUN":
            result, seconds = in_root(root, rest, env, INSTALL_TIMEOUT_S)
            assert result.returncode == 0, f"{line} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
            print(f"\n{line}: {seconds:.0f} s")
        else:
            pytest.fail(f"the Dockerfile has an instruction this test cannot carry out: {line}")
        done.append(instruction)
    return done


def grade_in_root(root: Path, question: Path, submission: Path | None) -> dict:
    """A fresh /grade in the root, as PrairieLearn mounts it for one job; the entrypoint run as root; its results.

    The job's log (staff only) must name the isolation level the grader reaches on this machine: a container
    must not weaken the sandbox.
    """
    grade = root / "grade"
    shutil.rmtree(grade, ignore_errors=True)
    shutil.copytree(question / "tests", grade / "tests")
    (grade / "student").mkdir()
    for name in CONTRACT if submission is not None else ():
        shutil.copy(submission / name, grade / "student" / name)
    (grade / "data").mkdir()
    (grade / "data" / "data.json").write_text(json.dumps({"params": {}, "submitted_answers": {}}))
    entrypoint = packaging.info_json("x")["externalGradingOptions"]["entrypoint"]
    # PrairieLearn gives a mounted entrypoint its executable bit, then runs it; the image's PYTHONPATH is set.
    done, seconds = in_root(root, f"chmod +x {entrypoint} && {entrypoint}", {"PYTHONPATH": "/grade/serverFilesCourse/"},
                            GRADE_TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((grade / "results" / "results.json").read_text())
    jsonschema.validate(results, SCHEMA)
    host = sh(sys.executable, "-c", "from autograder.sandbox import confine; print(confine.probe_level())", cwd=ROOT)
    assert f"isolation level: {host.stdout.strip()}\n" in done.stdout, done.stdout[:500]
    print(f"graded {submission.name if submission else 'nothing'} in {seconds:.1f} s: score {results.get('score')}")
    return results


def test_image_installs_and_the_entrypoint_grades_under_the_grade_layout(debian_base: Path, tmp_path: Path) -> None:
    built = packaging.build(tmp_path / "prairielearn", image="someone/amp-grader:1")
    question = built / "questions" / packaging.QUESTION
    with fresh_root(debian_base, "prairielearn") as root:
        env = {TORCH_INDEX_ENV: pip_index_url(), "PIP_CERT": "/host-ca.crt"}
        links = [bind_readonly(folder, root, f"/host-wheels/{i}") for i, folder in enumerate(wheel_folders())]
        if links:
            env["PIP_FIND_LINKS"] = " ".join(links)
        base, _ = in_root(root, "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                                "--no-install-recommends python3 python3-venv", {}, 1200)
        assert base.returncode == 0, base.stderr[-3000:]
        assert carry_out_dockerfile(built / "image", root, env) == ["ARG", "FROM", "COPY", "RUN"]
        check, _ = in_root(root, f"{packaging.VENV}/bin/python -c 'import torch; print(torch.__version__)'", {}, 120)
        assert check.stdout.startswith("2.13.0"), check.stdout + check.stderr

        solution = grade_in_root(root, question, ROOT / "solutions")
        assert solution["gradable"] is True and solution["score"] == 1.0, json.dumps(solution)[:3000]
        skeleton = grade_in_root(root, question, ROOT / "assignment")
        assert skeleton["gradable"] is True and skeleton["score"] == 0.0
        assert sum(t["points"] for t in skeleton["tests"]) == 0 and "Not implemented yet" in skeleton["output"]

        entry = next(e for e in catalogue.BUGS if e.name == BUG)
        bug = grade_in_root(root, question, catalogue.materialize(entry, tmp_path / BUG))
        lost = {t["name"].split()[0] for t in bug["tests"] if t["points"] < t["max_points"]}
        assert bug["gradable"] is True and entry.must_fail <= lost, (lost, entry.must_fail)
        assert entry.band[0] <= bug["score"] * 90 <= entry.band[1]
        public = {item.number for item in rubric.ITEMS if item.suite == rubric.PUBLIC}
        assert lost - public and all(WITHHELD in t["message"] for t in bug["tests"] if t["name"].split()[0] in lost - public)
