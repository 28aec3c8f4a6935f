"""Grading time per submission against the floor of starting Python and importing torch.

Both are measured in the same run, pinned to one core, as the median of a few
repeats (machines here are shared and noisy: read the ratio, not the seconds).

    python benchmarks/grading_speed.py [--repeats 3] [--submission solutions]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(command: list[str], core: int | None) -> float:
    def pin() -> None:
        if core is not None:
            os.sched_setaffinity(0, {core})

    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, preexec_fn=pin)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"command failed: {' '.join(command)}\n{done.stderr[-2000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--submission", type=Path, default=ROOT / "solutions")
    parser.add_argument("--all-cores", action="store_true", help="do not pin to one core")
    args = parser.parse_args()
    core = None if args.all_cores else min(os.sched_getaffinity(0))
    floor, grading = [], []
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.repeats):
            floor.append(timed([sys.executable, "-c", "import torch"], core))
            grading.append(timed([sys.executable, "-m", "autograder", "grade", str(args.submission), "--out", out], core))
    f, g = statistics.median(floor), statistics.median(grading)
    where = "all cores" if core is None else f"core {core}"
    print(f"pinned to: {where}; repeats: {args.repeats} (median)")
    print(f"floor  (python -c 'import torch'):          {f:6.2f} s")
    print(f"grade  (full public + hidden suite, sandbox): {g:6.2f} s")
    print(f"ratio  grade / floor:                       {g / f:6.2f}x   (goal: <= 3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
