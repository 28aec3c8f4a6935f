"""How many hypothesis examples each hidden property test needs to catch what it catches: a measurement.

    python benchmarks/example_counts.py [--ladder 5,10,20,40,100] [--mutants 60] [--jobs 2] [--out out/example-counts]
    make example-counts
    python benchmarks/example_counts.py --mutants 0 --bugs scale_of_number_scaled   # one new test's own bugs: minutes

Every catalogued bug (tests/catalogue) and a deterministic sample of cosmic-ray's mutants of ``solutions/``
(the sample ``make mutation`` grades) are graded once per rung of the ladder, with ``AMP_HIDDEN_EXAMPLES`` set to
that rung (one grader call per rung, ``--jobs`` workers).  For each hidden property test (a row whose test takes
hypothesis examples), a submission counts as *caught by that row* when the row loses points at the top rung; the
row's *need* is the smallest rung from which it catches every one of them at that rung and every rung above.  The
catch rate per rung is printed as a table and written to ``--out``/counts.json; the table and the needs go to
docs/validation.md by hand, and ``autograder/engine/examples.py`` sets each test's count with a margin above its
need (``tests/test_example_counts.py`` holds every count to the measurement in ``docs/example-counts.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "catalogue"), str(ROOT / "mutation")]

from autograder.engine import rubric  # noqa: E402
from autograder.engine.examples import property_tests  # noqa: E402


def submissions(out: Path, mutants: int, bugs: set[str] | None = None) -> list[str]:
    """The catalogue's bugs (those named in ``bugs``, when given) and a sample of mutants as submission folders under
    ``out/subs``; their names."""
    import catalogue

    subs = out / "subs"
    shutil.rmtree(subs, ignore_errors=True)
    subs.mkdir(parents=True)
    for entry in catalogue.BUGS:
        if bugs is None or entry.name in bugs:
            catalogue.materialize(entry, subs / entry.name)
    if mutants:
        from mutants import enumerate_mutants, even_spread, init_session
        from run import CONFIG, SOURCES, write_submission

        session = out / "session.sqlite"
        init_session(CONFIG, session)
        for mutant in even_spread(enumerate_mutants(session, SOURCES).mutants, mutants):
            write_submission(subs / mutant.folder, mutant)
    return sorted(path.name for path in subs.iterdir())


def grade(out: Path, examples: int, jobs: int) -> dict[str, set[str]]:
    """Every submission's rows that lost points, graded with ``examples`` examples per hidden property test."""
    folder = out / f"n{examples}"
    env = {**os.environ, "AMP_HIDDEN_EXAMPLES": str(examples), "AMP_DIAGNOSIS": "off"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(out / "subs"), "--out", str(folder),
                           "--jobs", str(jobs), "--no-progress"], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the grader exited with status {done.returncode}:\n{done.stderr[-3000:]}")
    print(f"{examples:>4} examples: graded in {time.monotonic() - started:.0f} s", flush=True)
    lost: dict[str, set[str]] = {}
    for results in folder.glob("*/results.json"):
        data = json.loads(results.read_text())
        lost[results.parent.name] = {test["number"] for test in data.get("tests", [])
                                     if test.get("score", 0) < test.get("max_score", 0)}
    return lost


def measure(graded: dict[int, dict[str, set[str]]]) -> dict[str, dict]:
    """Per property row: what it catches at the top rung, its catch rate per rung, and its need."""
    ladder = sorted(graded)
    top = graded[ladder[-1]]
    rows = {item.number: item.test for item in rubric.ITEMS if item.test in property_tests()}
    measured: dict[str, dict] = {}
    for number, test in rows.items():
        caught = sorted(name for name, lost in top.items() if number in lost)
        rate = {n: sum(number in graded[n].get(name, set()) for name in caught) for n in ladder}
        need = ladder[-1]
        for n in reversed(ladder):  # the smallest rung from which every higher rung catches all of them
            if rate[n] < len(caught):
                break
            need = n
        measured[test] = {"row": number, "caught": len(caught), "rate": {str(n): rate[n] for n in ladder},
                          "need": need if caught else 0}
    return measured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ladder", default="5,10,20,40,100", help="example counts to try (comma-separated)")
    parser.add_argument("--mutants", type=int, default=60, help="mutants sampled (0: the catalogue only)")
    parser.add_argument("--bugs", default=None, help="only these catalogued bugs (comma-separated): a new property "
                        "test's need on its own bugs, in minutes (with --mutants 0)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "example-counts")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    names = submissions(out, args.mutants, set(args.bugs.split(",")) if args.bugs else None)
    ladder = sorted({int(n) for n in args.ladder.split(",")})
    print(f"{len(names)} submissions, ladder {ladder}", flush=True)
    graded = {n: grade(out, n, args.jobs) for n in ladder}
    measured = measure(graded)
    missed = {n: sorted(name for name in names if graded[ladder[-1]][name] and not graded[n][name]) for n in ladder}
    record = {"ladder": ladder, "submissions": len(names), "mutants": args.mutants, "tests": measured,
              "not_caught_at_all": {str(n): missed[n] for n in ladder}}
    (out / "counts.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"\n| test | row | caught at {ladder[-1]} | " + " | ".join(f"{n}" for n in ladder) + " | need |")
    print("|---|---|---|" + "---|" * len(ladder) + "---|")
    for test, m in measured.items():
        print(f"| `{test}` | {m['row']} | {m['caught']} | "
              + " | ".join(str(m["rate"][str(n)]) for n in ladder) + f" | {m['need']} |")
    for n in ladder:
        print(f"{n:>4} examples: {len(missed[n])} submission(s) caught at {ladder[-1]} but not at all here")
    print(f"\nwrote {out / 'counts.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
