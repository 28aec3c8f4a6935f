"""Where a course's platform runs the grader on one submission: each module is one platform's runtime.

A runtime reads the platform's submission folder, grades it through the engine's one door
(:func:`autograder.engine.grader.grade_submission`) and writes the platform's results file, whatever
happens.  Building what a platform is given (a zip, a question folder) is :mod:`autograder.packaging`'s job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from autograder.engine import grader


def grade_upload(submission: Path, results: Path, private: Sequence[Path]) -> dict[str, Any]:
    """Grade one upload as every platform does: through the one door, with the shipped call plan and the diagnosis.

    ``results`` (where the platform reads its results file) and ``private`` (the grader's own folders) are kept
    from every student process. Returns :func:`~autograder.engine.grader.grade_submission`'s outcome.
    """
    grader.start()  # the zygote before pytest: the diagnosis and the plan import it
    from autograder.diagnosis.match import diagnosed_results
    from autograder.engine import plan

    hide = grader.private_paths(results, tuple(private))
    return grader.grade_submission("submission", submission, hide=hide, call_plan=plan.shipped_plan(),
                                   describe=diagnosed_results)
