"""One Slurm array task: grade a chunk of submissions, each result into the batch's inbox folder.

:mod:`autograder.batch.pools` submits :func:`grade_chunk` through submitit; the batch gathers the
inbox into its ledger as results land.  Grading goes through the engine's one door
(:func:`autograder.engine.grader.grade_submissions`), which also starts the grader in the right order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autograder.engine import grader
from autograder.sandbox.uids import claim_uid


def inbox_file(inbox: Path, name: str, digest: str) -> Path:
    """Where the result of submission ``name`` (of content ``digest``) lands."""
    return inbox / f"{name}.{digest[:20]}.json"


def grade_chunk(tasks: list[dict[str, Any]], inbox: str, hide: list[str], limits: dict[str, Any],
                uid: int | None) -> list[str]:
    """Grade ``tasks`` (name, path, digest, grader) in waves (:data:`autograder.engine.grader.WAVE`); each result
    lands in ``inbox``.

    Returns the names of the tasks whose results are in the inbox (graded now or before).
    """
    from autograder.engine.files import write_json_atomic

    grader.start()
    from autograder.diagnosis.match import diagnosed_results  # the judge's results, pytest with them: after the start
    claim = claim_uid(uid or 0)  # several array tasks may share a node
    uid = claim[0] if claim else None
    folder = Path(inbox)
    due = [task for task in tasks if not inbox_file(folder, task["name"], task["digest"]).exists()]
    for first in range(0, len(due), grader.WAVE):
        wave = due[first:first + grader.WAVE]
        outcomes = grader.grade_submissions([(task["name"], Path(task["path"])) for task in wave], hide=hide,
                                            limits_=grader.limits(limits), uid=uid, describe=diagnosed_results)
        for task, outcome in zip(wave, outcomes):
            write_json_atomic(inbox_file(folder, task["name"], task["digest"]),
                              {"name": task["name"], "digest": task["digest"], "grader": task["grader"], **outcome})
    return [task["name"] for task in tasks]
