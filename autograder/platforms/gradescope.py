"""Gradescope's runtime: ``run_autograder`` grades ``$AUTOGRADER_ROOT/submission`` into ``results/results.json``.

``python -m autograder.platforms.gradescope`` (what the zip's ``run_autograder`` executes, see
:mod:`autograder.packaging.gradescope`) never exits without writing results.json: a refused
isolation level, a broken submission or a fault of the grader itself each still give the student
a file that says what happened (the details go to the staff log, run_autograder's stdout).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from autograder import settings
from autograder.engine import grader, strings
from autograder.platforms import grade_upload


def run(root: Path) -> int:
    """Grade ``root/submission`` into ``root/results/results.json``; never exits without it."""
    results_path = root / "results" / "results.json"
    started = time.monotonic()  # execution_time counts everything: start-up and intake too
    try:
        if os.geteuid() == 0:  # the student process runs as another uid: keep it out of our files
            for private in (root / "source", root / "results"):
                if private.exists():
                    private.chmod(0o700)
        try:
            grader.check_isolation(None)  # $AMP_MIN_ISOLATION, else the sealed level
        except grader.IsolationRefused as refused:
            from autograder.engine.files import write_json_atomic
            from autograder.engine.results import error_results, on_gradescope

            print(refused)  # the staff log
            data = error_results(strings.text("isolation_refused"))
            data["extra_data"] = {"isolation": refused.reached, "refused": str(refused)}
            write_json_atomic(results_path, on_gradescope(data))
            return 0
        outcome = grade_upload(root / "submission", root / "results", (root / "source" / "autograder",))
        from autograder.engine.files import write_json_atomic
        from autograder.engine.results import on_gradescope, with_public_parts

        data = on_gradescope(with_public_parts(outcome["results"]))  # a failing public example is seen before the due date
        data["execution_time"] = round(time.monotonic() - started, 1)
        if outcome["staff_log"]:
            print(outcome["staff_log"])  # run_autograder's stdout: visible to staff only (stdout_visibility hidden)
        write_json_atomic(results_path, data)
        return 0
    except BaseException:  # noqa: BLE001 - results.json must exist whatever happened
        print(traceback.format_exc(), file=sys.stderr)
        from autograder.engine.files import write_json_atomic
        from autograder.engine.results import error_results, on_gradescope

        write_json_atomic(results_path, on_gradescope(error_results(strings.fallback_text("grader_failed"))))
        return 0


def main() -> int:
    return run(settings.autograder_root())


if __name__ == "__main__":
    status = main()
    # No interpreter shutdown: results.json is written and every student process stopped, and tearing down a
    # process that holds torch, pytest and hypothesis costs a twentieth of a second for nothing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
