"""What the diagnosis (the "Likely mistake" lines) adds to grading a batch: the goal is at most 10%.

Grades the same submissions (the solution and a few catalogue bugs) in this process, the way a batch
worker does (:func:`autograder.engine.grader.grade_submission`, with the call plan), alternately with the
diagnosis off (``AMP_DIAGNOSIS=off``) and on, and prints

* the end-to-end ratio on/off (noisy on a shared machine: rounds alternate the order);
* the diagnosis's own time (inside :func:`autograder.diagnosis.match.diagnose`, the only work it adds
  to grading: the answers it compares are the ones the call plan fetched anyway) as a share of the
  grading time with it on: the stable number to read.

``--table FILE`` uses a table built beforehand (``python -m autograder.diagnosis build --out FILE``: the
whole catalogue, the realistic size); without it a table of the graded bugs is built first (untimed).

    .venv/bin/python benchmarks/diagnosis_overhead.py [--rounds 2] [--table FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "assignment")]

BUGS = ["growth_off_by_one", "backoff_divides", "nan_ignored", "no_zero_grad"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--table", type=Path, default=None)
    args = parser.parse_args(argv)

    from autograder.engine import grader

    grader.start()
    from autograder import settings
    from autograder.diagnosis import match, table
    from autograder.engine import plan

    scratch = Path(tempfile.mkdtemp(prefix="amp-diagnosis-bench-"))
    try:
        call_plan = plan.current_plan()
        catalogue = table.load_catalogue()
        by_name = {entry.name: entry for entry in catalogue.BUGS}
        folders = {"solution": shutil.copytree(ROOT / "solutions", scratch / "solution")}
        folders.update({name: catalogue.materialize(by_name[name], scratch / name) for name in BUGS})
        table_path = args.table
        if table_path is None:
            table_path = scratch / "diagnosis.json"
            table_path.write_text(table.build(call_plan, [by_name[name] for name in BUGS]).to_json())
        size = len(table.Table.from_json(table_path.read_text()).rows)

        spent = [0.0]
        original = match.diagnose

        def timed(report, found):  # type: ignore[no-untyped-def]
            begun = time.perf_counter()
            try:
                return original(report, found)
            finally:
                spent[0] += time.perf_counter() - begun

        match.diagnose = timed
        totals = {"off": 0.0, "on": 0.0}
        diagnosed = 0
        limits = grader.limits()
        for round_ in range(args.rounds):
            for mode in (("off", "on") if round_ % 2 == 0 else ("on", "off")):
                os.environ[settings.DIAGNOSIS.env] = "off" if mode == "off" else str(table_path)
                for name, folder in folders.items():
                    begun = time.perf_counter()
                    outcome = grader.grade_submission(name, folder, limits_=limits, call_plan=call_plan,
                                                      describe=match.diagnosed_results)
                    totals[mode] += time.perf_counter() - begun
                    if mode == "on":
                        diagnosed += bool(outcome["results"].get("extra_data", {}).get("diagnosis"))
        graded = len(folders) * args.rounds
        print(f"{graded} gradings per mode ({len(folders)} submissions x {args.rounds} rounds), table of {size} entries")
        print(f"diagnosis off: {totals['off']:.1f} s   on: {totals['on']:.1f} s   "
              f"ratio on/off: {totals['on'] / totals['off']:.3f} (noisy: shared machine)")
        print(f"diagnosis's own time: {spent[0] * 1000:.1f} ms = {spent[0] / totals['on']:.2%} of grading "
              f"with it on (goal: at most 10%); {diagnosed} of {graded} gradings diagnosed a row")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
