"""`make test` on a busy machine: the project's tests beside a batch grading that runs in a loop.

A TA's laptop or a shared CI runner is rarely quiet.  This runs ``make test`` (or the command given after
``--``) while, beside it, ``python -m autograder grade`` grades the bundled examples on two workers again and
again, so that the tests meet what they meet in real life: many processes, a load of 4 or more on 2 cores.
It prints how long the tests took, how many background batches ran (and whether each ended well: a batch
that failed here would also be a finding), and exits with the tests' own status.

    .venv/bin/python benchmarks/busy_test.py                  # make test beside the loop
    .venv/bin/python benchmarks/busy_test.py -- make test-all  # any command
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ("solutions", "assignment", "examples/partially_correct")


def grade_in_a_loop(stop: threading.Event, outcomes: list[int]) -> None:
    """Grade the examples on two workers until ``stop`` is set; each batch's exit status into ``outcomes``."""
    work = Path(tempfile.mkdtemp(prefix="amp-busy-"))
    try:
        while not stop.is_set():
            out = work / "out"
            shutil.rmtree(out, ignore_errors=True)
            command = [sys.executable, "-m", "autograder", "grade", *EXAMPLES, "--out", str(out), "--jobs", "2",
                       "--no-progress"]
            batch = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while batch.poll() is None:
                if stop.wait(0.5):
                    batch.terminate()
                    batch.wait()
                    return
            outcomes.append(batch.returncode)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="*", default=["make", "test"], help="the tests to run (default: make test)")
    args = parser.parse_args(argv)
    stop, outcomes = threading.Event(), []
    background = threading.Thread(target=grade_in_a_loop, args=(stop, outcomes), daemon=True)
    background.start()
    started = time.monotonic()
    try:
        status = subprocess.run(args.command, cwd=ROOT).returncode
    finally:
        stop.set()
        background.join()
    minutes = (time.monotonic() - started) / 60
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"busy_test: {' '.join(args.command)} exited {status} in {minutes:.1f} min beside {len(outcomes)} "
          f"finished batch grading(s) (exit statuses {sorted(set(outcomes)) or 'none yet'}; load now {load:.1f})")
    return status


if __name__ == "__main__":
    sys.exit(main())
