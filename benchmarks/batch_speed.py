"""Batch grading speed: N realistic submissions graded with ``--jobs 2``, against a naive baseline.

The mix is what a course sees: 60 % correct or nearly correct (the reference and
the catalogue's correct variants), 37 % catalogue bugs (tests/catalogue, each bug in turn),
2 % crashing and 1 % hanging submissions.  They are graded with
``python -m autograder grade DIR --jobs 2`` (the call plan on, as in any batch of more than a
few submissions per worker) and the run prints submissions per minute, the per-submission
overhead beyond test time, the ratio against a naive baseline measured in the same run (a
fresh ``python -m autograder grade ONE`` process per submission, sequential, on a subset with
the same mix), and extrapolations to 500 and 2,000 submissions.

The call plan is recorded by the batch itself, into a fresh plan cache (``$AMP_PLAN_CACHE`` in
the work folder: a first run, the slower case; the naive baseline then finds it, as any later run does).

Hanging submissions run into the per-call limit: the whole run uses short limits
(``--call-timeout 3 --submission-timeout 15``) so that they cost seconds, not minutes.

Then times the similarity report (``python -m autograder similarity``) on 500 distinct
submissions (goal: under 60 s on 2 cores), against copydetect's one-pair-at-a-time
``compare_files`` measured on a subset in the same run and extrapolated by the number of pairs.

    python benchmarks/batch_speed.py [--n 100] [--jobs 2] [--naive 8] [--similarity-n 500] [--no-similarity] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
ASSIGNMENT = ROOT / "assignment"
CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")
LIMITS = ("--call-timeout", "3", "--submission-timeout", "15")
#: (kind, share of the batch); the order is also the order of the naive subset's picks
MIX = (("correct", 0.60), ("buggy", 0.37), ("crashing", 0.02), ("hanging", 0.01))
GOAL_SECONDS, GOAL_N, LARGE_N = 300, 500, 2000  # the goal: 500 in 5 min on 2 cores, i.e. 100/min
SIMILARITY_GOAL_SECONDS = 60
VARIANTS = ROOT / "tests" / "catalogue" / "variants"


def _catalogue() -> object:
    sys.path.insert(0, str(ROOT / "tests" / "catalogue"))
    import catalogue

    return catalogue


def _write(folder: Path, kind: str, k: int) -> None:
    catalogue = _catalogue()
    if kind in ("correct", "buggy"):
        entries = [e for e in catalogue.ENTRIES if e.kind == ("variant" if kind == "correct" else "bug")]
        if kind == "correct" and k % 3 == 0:  # a third hand in the reference itself
            folder.mkdir(parents=True)
            for name in CONTRACT:
                shutil.copy(SOLUTIONS / name, folder / name)
        else:
            catalogue.materialize(entries[k % len(entries)], folder)
    else:
        folder.mkdir(parents=True)
        for name in CONTRACT:
            shutil.copy(SOLUTIONS / name, folder / name)
        amp = folder / "amp_step.py"
        if kind == "crashing":  # the static rules refuse os._exit: the file is not run (as in production)
            amp.write_text(amp.read_text() + "\n\nimport os\nos._exit(3)\n")
        else:
            amp.write_text(amp.read_text() + "\n\ndef amp_step(*args, **kwargs):\n    while True:\n        pass\n")
    (folder / "answers.py").write_text((folder / "answers.py").read_text() + f"\n# student {k}\n")


def generate(folder: Path, n: int) -> dict[str, str]:
    """N submissions named s000..; returns name -> kind."""
    counts = {kind: max(1, int(round(share * n))) for kind, share in MIX}
    counts["correct"] += n - sum(counts.values())
    kinds = [kind for kind, _ in MIX for _ in range(counts[kind])]
    # interleave kinds so that the batch is not sorted by difficulty
    order = sorted(range(n), key=lambda i: (i * 7919) % n)
    names = {}
    for k, index in enumerate(order):
        name = f"s{k:03d}"
        _write(folder / name, kinds[index], k)
        names[name] = kinds[index]
    return names


def grade(paths: list[Path], out: Path, jobs: int) -> float:
    command = [sys.executable, "-m", "autograder", "grade", *map(str, paths), "--out", str(out), "--jobs", str(jobs),
               "--no-progress", *LIMITS]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"grading failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return elapsed


def similarity_inputs(folder: Path, n: int) -> None:
    """N submissions, every file distinct: the solution's, two rewritten scalers, a buggy one, the skeleton;
    each with its own identifier suffix and comment (so that no fingerprint is reused between files)."""
    scalers = [SOLUTIONS / "loss_scaler.py", VARIANTS / "plain_style" / "loss_scaler.py",
               VARIANTS / "tensor_scale_lazy" / "loss_scaler.py", ASSIGNMENT / "loss_scaler.py"]
    steps = [SOLUTIONS / "amp_step.py", ASSIGNMENT / "amp_step.py"]
    for k in range(n):
        target = folder / f"s{k:03d}"
        target.mkdir(parents=True)
        scaler = scalers[k % len(scalers)].read_text().replace("optimizer", f"optimizer_{k}")
        if k % 7 == 0:
            scaler = scaler.replace("self._scale * self._backoff_factor", "self._scale * 0.25")
        (target / "loss_scaler.py").write_text(f"# student {k}\n" + scaler)
        (target / "amp_step.py").write_text(f"# student {k}\n" + steps[k % 5 == 0].read_text().replace(
            "optimizer", f"optimizer_{k}"))


def similarity_speed(work: Path, n: int, subset: int = 40) -> None:
    from copydetect.detector import compare_files

    from autograder.batch import inputs, similarity

    similarity_inputs(work / "similar", n)
    command = [sys.executable, "-m", "autograder", "similarity", str(work / "similar"), "--out", str(work / "sim")]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"similarity failed ({done.returncode}):\n{done.stderr[-3000:]}")
    # the comparison step alone: all pairs at once (numpy) vs copydetect's compare_files one pair at a time
    # (measured on the first `subset` submissions, extrapolated by the number of pairs); same fingerprints
    subs = inputs.discover([work / "similar"], work / "scratch").submissions
    report = similarity.analyse(subs)
    started = time.perf_counter()
    for file in similarity.FILES:
        similarity.all_pairs([report.prints[(s.name, file)] for s in subs if (s.name, file) in report.prints])
    vectorised = time.perf_counter() - started
    started = time.perf_counter()
    for file in similarity.FILES:
        prints = [report.prints[(s.name, file)] for s in subs[:subset] if (s.name, file) in report.prints]
        for i, first in enumerate(prints):
            for second in prints[i + 1:]:
                compare_files(first, second)
    per_pair = (time.perf_counter() - started) / (subset * (subset - 1) / 2)
    naive = per_pair * n * (n - 1) / 2
    verdict = "meets" if seconds <= SIMILARITY_GOAL_SECONDS else "misses"
    print(f"similarity of {n} submissions (python -m autograder similarity: read, fingerprint, all pairs of both "
          f"files, CSV, HTML): {seconds:.1f} s ({verdict} the goal of {SIMILARITY_GOAL_SECONDS} s)")
    print(f"  comparing all pairs: {vectorised:.2f} s at once vs copydetect's compare_files one pair at a time "
          f"{per_pair * 1000:.2f} ms per pair (measured on {subset}) -> {naive:.0f} s for {n}: "
          f"{naive / vectorised:.0f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="submissions (default 100)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--naive", type=int, default=8, help="submissions in the naive baseline's subset (default 8)")
    parser.add_argument("--keep", type=Path, help="keep the submissions and outputs in this folder")
    parser.add_argument("--similarity-n", type=int, default=GOAL_N, help="submissions for the similarity timing (500)")
    parser.add_argument("--only-similarity", action="store_true", help="time only the similarity report")
    parser.add_argument("--no-similarity", action="store_true", help="do not time the similarity report")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="batch-speed-"))
    shutil.rmtree(work / "plan-cache", ignore_errors=True)
    os.environ["AMP_PLAN_CACHE"] = str(work / "plan-cache")  # the batch records; every later run reuses
    shutil.rmtree(work / "subs", ignore_errors=True)
    shutil.rmtree(work / "out", ignore_errors=True)
    shutil.rmtree(work / "naive", ignore_errors=True)
    for stale in ("similar", "sim", "scratch"):
        shutil.rmtree(work / stale, ignore_errors=True)
    if args.only_similarity:
        similarity_speed(work, args.similarity_n)
        return 0
    kinds = generate(work / "subs", args.n)
    mix = collections.Counter(kinds.values())
    print(f"{args.n} synthetic submissions: " + ", ".join(f"{mix[k]} {k}" for k, _ in MIX)
          + f"; limits {' '.join(LIMITS)}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")

    batch_seconds = grade([work / "subs"], work / "out", args.jobs)
    with sqlite3.connect(work / "out" / "ledger.sqlite") as db:
        results = {name: json.loads(text) for name, text in db.execute("SELECT name, results FROM graded")}
    test_seconds = sum(float(r.get("execution_time", 0.0)) for r in results.values())
    with open(work / "out" / "gradebook.csv", newline="") as stream:
        scores = {row["submission"]: float(row["score"]) for row in csv.DictReader(stream)}
    by_kind: dict[str, list[float]] = collections.defaultdict(list)
    for name, kind in kinds.items():
        by_kind[kind].append(scores[name])

    # the naive baseline: one fresh process per submission, one after the other, same mix
    picks: list[str] = []
    per_kind = {kind: max(1, round(share * args.naive)) for kind, share in MIX}
    for kind, count in per_kind.items():
        picks += [name for name, k in sorted(kinds.items()) if k == kind][:count]
    naive_times: dict[str, list[float]] = collections.defaultdict(list)
    for name in picks:
        naive_times[kinds[name]].append(grade([work / "subs" / name], work / "naive" / name, 1))
    naive_per_sub = sum(share * (sum(naive_times[k]) / len(naive_times[k])) for k, share in MIX)

    n = args.n
    per_sub_wall = batch_seconds / n
    overhead = (batch_seconds * args.jobs - test_seconds) / n
    print()
    print(f"batch (--jobs {args.jobs}): {batch_seconds:.1f} s for {n} -> {60 * n / batch_seconds:.1f} submissions/min, "
          f"{per_sub_wall:.2f} s each (wall)")
    print(f"  test time (judge, summed): {test_seconds:.1f} s = {test_seconds / n:.2f} s per submission; "
          f"overhead beyond test time: {overhead:.2f} s per submission (wall x jobs - test time, / N: start-up, "
          "the call plan, waits for a room)")
    print("  mean score by kind: " + ", ".join(f"{k} {sum(v) / len(v):.1f}" for k, v in sorted(by_kind.items())))
    print(f"naive (a fresh `python -m autograder grade ONE` per submission, sequential, {len(picks)} of them): "
          + ", ".join(f"{k} {sum(v) / len(v):.2f} s" for k, v in naive_times.items())
          + f"; mix-weighted {naive_per_sub:.2f} s per submission")
    print(f"speed-up over naive: {naive_per_sub / per_sub_wall:.2f}x wall "
          f"({naive_per_sub / (per_sub_wall * args.jobs):.2f}x per core)")
    projected = per_sub_wall * GOAL_N
    verdict = "meets" if projected <= GOAL_SECONDS else "misses"
    print(f"extrapolated to {GOAL_N}: {projected / 60:.1f} min with --jobs {args.jobs} ({verdict} the goal of "
          f"{GOAL_SECONDS // 60} min, i.e. {60 * GOAL_N / GOAL_SECONDS:.0f}/min); naive: "
          f"{naive_per_sub * GOAL_N / 60:.1f} min")
    print(f"extrapolated to {LARGE_N}: {per_sub_wall * LARGE_N / 60:.1f} min with --jobs {args.jobs}; naive: "
          f"{naive_per_sub * LARGE_N / 60:.1f} min")
    if not args.no_similarity:
        similarity_speed(work, args.similarity_n)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (other work on the machine slows every number above)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
