"""PrairieLearn's runtime: the question's entrypoint grades ``$AMP_GRADE_ROOT/student`` into ``results/results.json``.

``python -m autograder.platforms.prairielearn`` (what the question's ``tests/run_grader`` executes, see
:mod:`autograder.packaging.prairielearn`) reads PrairieLearn's external-grading layout
(https://docs.prairielearn.com/externalGrading/, "The Grading Process")::

    /grade/student/    the uploaded files          /grade/tests/     the grader (this package, hidden tests)
    /grade/data/       data.json                   /grade/results/   results.json, written here, always

and never exits without writing ``results/results.json`` in PrairieLearn's format ("Grading results"):
``score`` is the CPU part's share (points / 90) and ``tests`` has one row per rubric row with ``points`` and
``max_points``.  An upload that cannot be graded (nothing uploaded, an unreadable archive, a machine
that cannot isolate student code, a fault of the grader) is ``gradable: false`` with the reason in
``format_errors``: PrairieLearn then charges no attempt.

PrairieLearn shows every row at once and has no "after the due date", so a hidden row shows its name and
points but never its message or what the code printed during it (either could show a hidden input); its
details stay in the staff's TA batch.  With ``AMP_HIDDEN_VISIBILITY=visible`` hidden rows are shown whole,
as on Gradescope.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Mapping

from autograder import settings
from autograder.engine import grader, rubric, strings
from autograder.platforms import grade_upload

#: Folders of the grading root that hold what no student process may read (the grader, the answers, the results).
PRIVATE = ("tests", "data", "results", "serverFilesCourse")


def not_gradable(reason: str) -> dict[str, Any]:
    """results.json for an upload that could not be graded: no score, no attempt charged, the reason shown."""
    return {"gradable": False, "format_errors": [reason], "message": reason, "tests": []}


def prairielearn_results(data: Mapping[str, Any]) -> dict[str, Any]:
    """PrairieLearn's results.json from the engine's (Gradescope-shaped) results of one graded submission.

    Rows keep their points; a row not visible at once keeps its name and points only (see the module's doc),
    plus the messages of its failed public examples when the engine reports them.
    """
    # (imported here: the engine's results module loads pytest, which only grading may import, after the zygote)
    from autograder.engine.results import PUBLIC_PARTS  # a hidden row's failed public examples, shown at once

    cpu_points = rubric.max_points()
    score = float(data.get("score", 0.0))
    public_parts = data.get("extra_data", {}).get(PUBLIC_PARTS) or {}
    tests = []
    for row in data.get("tests", []):
        shown = row.get("visibility") == "visible"  # a row that does not say is withheld
        message = str(row.get("output", "")) if shown else strings.text("hidden_row_withheld")
        if not shown and public_parts.get(str(row.get("number"))):
            message += "\n\n" + str(public_parts[str(row.get("number"))])
        if float(row.get("max_score", 0.0)) == 0 and row.get("number") == "4":  # the GPU part's informational row
            message = strings.text("no_gpu_here")
        tests.append({"name": str(row.get("name", "")), "points": float(row.get("score", 0.0)),
                      "max_points": float(row.get("max_score", 0.0)), "message": message})
    return {
        "gradable": True,
        "score": round(min(1.0, max(0.0, score / cpu_points)), 6),
        "message": strings.text("cpu_score", score=round(score, 4), points=cpu_points),
        "output": str(data.get("output", "")),
        "tests": tests,
    }


def _write(root: Path, results: dict[str, Any]) -> None:
    from autograder.engine.files import write_json_atomic

    (root / "results").mkdir(parents=True, exist_ok=True)  # PrairieLearn does not create it
    write_json_atomic(root / "results" / "results.json", results)


def run(root: Path) -> int:
    """Grade ``root/student`` into ``root/results/results.json``; never exits without it."""
    started = time.monotonic()
    try:
        if os.geteuid() == 0:  # the student process runs as another uid: keep it out of our files
            (root / "results").mkdir(parents=True, exist_ok=True)
            for name in PRIVATE:
                if (root / name).exists():
                    (root / name).chmod(0o700)
        student = root / "student"
        if not student.is_dir() or not any(student.iterdir()):
            _write(root, not_gradable(strings.text("nothing_uploaded")))
            return 0
        try:
            grader.check_isolation(None)  # $AMP_MIN_ISOLATION, else the sealed level
        except grader.IsolationRefused as refused:
            print(refused)  # the grading job's log: staff only
            _write(root, not_gradable(strings.text("isolation_refused")))
            return 0
        outcome = grade_upload(student, root / "results", [root / name for name in PRIVATE])
        if outcome["staff_log"]:
            print(outcome["staff_log"])
        if outcome["status"] != "graded":
            print(f"not graded: {outcome['reason']}")
            _write(root, not_gradable(str(outcome["results"].get("output") or outcome["reason"])))
            return 0
        results = prairielearn_results(outcome["results"])
        print(f"graded in {time.monotonic() - started:.1f} s; isolation "
              f"{outcome['results'].get('extra_data', {}).get('isolation')}")
        _write(root, results)
        return 0
    except BaseException:  # noqa: BLE001 - results.json must exist whatever happened
        print(traceback.format_exc(), file=sys.stderr)
        _write(root, not_gradable(strings.fallback_text("grader_failed")))
        return 0


def main() -> int:
    return run(settings.grade_root())


if __name__ == "__main__":
    sys.exit(main())
