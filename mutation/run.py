"""Mutation score of the grader: mutate solutions/, grade every mutant, count the ones it catches.

    python mutation/run.py [--out out/mutation] [--jobs 2] [--limit N] [--fresh]
    make mutation                      # the same, with the defaults

1. ``cosmic-ray init mutation/cosmic-ray.toml OUT/session.sqlite`` enumerates the mutants
   of ``solutions/loss_scaler.py`` and ``solutions/amp_step.py`` (cosmic-ray's core
   operators; it has no string operator, so docstrings and messages are never mutated).
2. Mutants inside type annotations are marked *skipped* in that session, as cosmic-ray's
   own ``cr-filter-*`` tools do: both files start with ``from __future__ import
   annotations``, so an annotation is never evaluated and such a mutant is equivalent.
3. Every other mutant becomes a complete submission ``OUT/subs/<id>/`` (the three contract
   files of solutions/, one of them mutated), next to an unmutated ``_baseline``; all of
   them are graded by ONE call ``python -m autograder grade OUT/subs --out OUT/grade``
   (torch imported once per worker).  The baseline must get full marks, or the run stops.
4. A mutant is *killed* when its score is below full marks, *survived* at full marks
   (``errored``: the grader could not grade it; rerun).  The results go back into the
   cosmic-ray session (``cr-report OUT/session.sqlite`` works), and the report prints
   every survivor's diff, marked *equivalent* when ``mutation/equivalent.toml`` lists it
   (with the reason) and *TEST GAP* otherwise.

Score = killed / (killed + survivors not listed as equivalent).  Exit status 1 when it is
below ``--fail-under`` (default 95) or a mutant errored.  Re-running resumes: the grader's
ledger in OUT/grade regrades only mutants whose source (or the grader) changed, and mutant
folders are named by a hash of their source.  ``--fresh`` starts from nothing.

Time: 264 mutants, 221 graded; 6-13 minutes at ``--jobs 2`` on a 2-core machine (measured:
371 s and 761 s of grading under other load).  ``--limit N`` grades a deterministic sample of N.
``--check-solutions`` grades solutions/ as it is on disk and exits 1 below full marks:
the ``test-command`` for a plain (slow, one process per mutant) ``cosmic-ray exec``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mutants import ROOT, Mutant, enumerate_mutants, even_spread, init_session, load_toml, record, report

CONFIG = ROOT / "mutation" / "cosmic-ray.toml"
EQUIVALENT = ROOT / "mutation" / "equivalent.toml"
SOURCES = ("solutions/loss_scaler.py", "solutions/amp_step.py")
CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")
BASELINE = "_baseline"


def grade(paths: list[Path], out: Path, jobs: int) -> float:
    """One grader call over ``paths``; returns its wall time."""
    cmd = [sys.executable, "-m", "autograder", "grade", *map(str, paths), "--out", str(out),
           "--jobs", str(jobs), "--no-progress"]
    print("$", " ".join(cmd), flush=True)
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        print(proc.stdout[-4000:])
        sys.exit(f"the grader exited with status {proc.returncode}")
    print(proc.stdout.strip().splitlines()[-2] if proc.stdout.strip() else "", flush=True)
    return time.monotonic() - start


def ledger_rows(out: Path) -> dict[str, sqlite3.Row]:
    con = sqlite3.connect(out / "ledger.sqlite")
    con.row_factory = sqlite3.Row
    try:
        return {row["name"]: row for row in con.execute("SELECT * FROM graded")}
    finally:
        con.close()


def lost_tests(row: sqlite3.Row) -> str:
    results = json.loads(row["results"])
    lost = [t["name"] for t in results.get("tests", []) if t.get("score", 0) < t.get("max_score", 0)]
    return ", ".join(lost)


def check_solutions(jobs: int) -> int:
    """Grade solutions/ as it is on disk; 0 at full marks (a cosmic-ray test-command)."""
    with tempfile.TemporaryDirectory() as tmp:
        grade([ROOT / "solutions"], Path(tmp) / "grade", jobs)
        row = ledger_rows(Path(tmp) / "grade")["solutions"]
        return 0 if row["status"] == "graded" and row["score"] >= row["max_score"] else 1


def write_submission(folder: Path, mutant: Mutant | None) -> None:
    """The three contract files of solutions/, one of them replaced by the mutant."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in CONTRACT:
        shutil.copy2(ROOT / "solutions" / name, folder / name)
    if mutant is not None:
        (folder / mutant.file).write_text(mutant.source, encoding="utf-8")


def judge(mutants: list[Mutant], rows: dict[str, sqlite3.Row]) -> None:
    """Killed: the mutant's submission lost points; survived: full marks."""
    for m in mutants:
        row = rows.get(m.folder)
        if row is None or row["status"] != "graded":
            m.verdict, m.detail = "errored", row["reason"] if row else "not graded"
            continue
        m.verdict = "killed" if row["score"] < row["max_score"] else "survived"
        m.detail = f'score {row["score"]:g}/{row["max_score"]:g}; lost: {lost_tests(row) or "-"}'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "mutation")
    parser.add_argument("--jobs", type=int, default=2, help="grader worker processes (default 2)")
    parser.add_argument("--limit", type=int, default=None, help="grade only a deterministic sample of N mutants")
    parser.add_argument("--fresh", action="store_true", help="delete OUT first (no resume)")
    parser.add_argument("--fail-under", type=float, default=95.0, help="exit 1 below this score (%%)")
    parser.add_argument("--check-solutions", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.check_solutions:
        return check_solutions(args.jobs)

    out: Path = args.out.resolve()
    if args.fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    session = out / "session.sqlite"
    started = time.monotonic()

    init_session(CONFIG, session)
    found = enumerate_mutants(session, SOURCES)
    mutants = even_spread(found.mutants, args.limit)
    subs = out / "subs"
    shutil.rmtree(subs, ignore_errors=True)
    write_submission(subs / BASELINE, None)
    for m in mutants:
        write_submission(subs / m.folder, m)
    print(f"cosmic-ray: {found.total} mutants, {found.skipped} in annotations (skipped), "
          f"{found.invalid} not valid Python (incompetent), "
          f"grading {len(mutants)} + baseline with --jobs {args.jobs}", flush=True)

    # One grader call for all of them (resumes from OUT/grade/ledger.sqlite).
    grade([subs], out / "grade", args.jobs)
    rows = ledger_rows(out / "grade")
    base = rows.get(BASELINE)
    if base is None or base["status"] != "graded" or base["score"] < base["max_score"]:
        print(f"baseline (unmutated solutions/) did not get full marks: {dict(base) if base else None}")
        return 2

    judge(mutants, rows)
    stale = record(session, mutants, load_toml(EQUIVALENT).get("mutant", []))
    (out / "mutants.json").write_text(json.dumps([m.summary() for m in mutants], indent=1))
    score = report(mutants, found, "mutation/equivalent.toml", stale, len(mutants) < len(found.mutants),
                   time.monotonic() - started, f"{out / 'mutants.json'}, cr-report {session}")
    return 1 if any(m.verdict == "errored" for m in mutants) or score < args.fail_under else 0


if __name__ == "__main__":
    sys.exit(main())
