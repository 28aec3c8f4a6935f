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
import ast
import difflib
import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cosmic_ray.mutating import mutate_code  # noqa: E402
from cosmic_ray.plugins import get_operator  # noqa: E402
from cosmic_ray.work_db import WorkDB, use_db  # noqa: E402
from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult  # noqa: E402

try:
    import tomllib  # Python >= 3.11
except ModuleNotFoundError:  # Python 3.10: the `toml` package, a dependency of cosmic-ray
    import toml as tomllib  # type: ignore[no-redef]

CONFIG = ROOT / "mutation" / "cosmic-ray.toml"
EQUIVALENT = ROOT / "mutation" / "equivalent.toml"
CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")
BASELINE = "_baseline"


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions of every annotation in ``source`` (parameters, returns, AnnAssign)."""
    nodes = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.arg) and node.annotation is not None:
            nodes.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            nodes.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            nodes.append(node.annotation)
    return [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in nodes]


def in_annotation(spec, source: str) -> bool:
    """Whether the mutation lies inside an annotation of a module that never evaluates them."""
    if "from __future__ import annotations" not in source:
        return False
    start, end = tuple(spec.start_pos), tuple(spec.end_pos)
    return any(lo <= start and end <= hi for lo, hi in annotation_spans(source))


def changed_lines(original: str, mutated: str) -> tuple[str, str]:
    """The removed and the added lines of a mutation, each stripped and joined by newlines."""
    before, after = [], []
    for line in difflib.unified_diff(original.splitlines(), mutated.splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        (before if line.startswith("-") else after).append(line[1:].strip())
    return "\n".join(before), "\n".join(after)


def unified_diff(original: str, mutated: str, path: str) -> str:
    return "\n".join(difflib.unified_diff(original.splitlines(), mutated.splitlines(),
                                          f"a/{path}", f"b/{path}", lineterm="", n=1))


def load_equivalents() -> list[dict]:
    if not EQUIVALENT.exists():
        return []
    with open(EQUIVALENT, "rb") as handle:
        data = tomllib.load(handle) if tomllib.__name__ == "tomllib" else tomllib.loads(handle.read().decode())
    return data.get("mutant", [])


def matching_entry(entries: list[dict], file: str, before: str, after: str) -> dict | None:
    return next((e for e in entries if e["file"] == file and e["before"].strip() == before
                 and e["after"].strip() in (after, "*")), None)  # "*": any mutation of that line


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
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        grade([ROOT / "solutions"], Path(tmp) / "grade", jobs)
        row = ledger_rows(Path(tmp) / "grade")["solutions"]
        return 0 if row["status"] == "graded" and row["score"] >= row["max_score"] else 1


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

    # 1. cosmic-ray enumerates the mutants (a new session every run: the sources may have changed).
    session.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "cosmic_ray.cli", "init", str(CONFIG), str(session)],
                   cwd=ROOT, check=True)

    sources = {p: (ROOT / p).read_text(encoding="utf-8")
               for p in ("solutions/loss_scaler.py", "solutions/amp_step.py")}
    subs = out / "subs"
    shutil.rmtree(subs, ignore_errors=True)
    (subs / BASELINE).mkdir(parents=True)
    for name in CONTRACT:
        shutil.copy2(ROOT / "solutions" / name, subs / BASELINE / name)

    mutants = []  # dicts: job_id, folder, file, operator, occurrence, line, diff, before, after
    skipped = invalid = 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        items = sorted(db.work_items, key=lambda w: (str(w.mutations[0].module_path), w.mutations[0].start_pos,
                                                     w.mutations[0].operator_name, w.mutations[0].occurrence))
        for item in items:
            (spec,) = item.mutations
            path = str(spec.module_path)
            source = sources[path]
            if in_annotation(spec, source):
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                      output="annotation: never evaluated (equivalent)"))
                skipped += 1
                continue
            mutated = mutate_code(source, get_operator(spec.operator_name)(), spec.occurrence)
            if mutated is None:
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.NO_TEST))
                continue
            try:  # parso sees the bare `*` of keyword-only parameters as an operator
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", SyntaxWarning)  # `0.0 is x`: valid, and graded
                    compile(mutated, path, "exec")
            except SyntaxError as exc:
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.NORMAL,
                                                      test_outcome=TestOutcome.INCOMPETENT,
                                                      output=f"not Python: {exc}"))
                invalid += 1
                continue
            folder = "m" + hashlib.sha256((path + "\0" + mutated).encode()).hexdigest()[:12]
            before, after = changed_lines(source, mutated)
            mutants.append({"job_id": item.job_id, "folder": folder, "file": Path(path).name,
                            "operator": spec.operator_name, "occurrence": spec.occurrence,
                            "line": spec.start_pos[0], "diff": unified_diff(source, mutated, path),
                            "before": before, "after": after, "source": mutated})
    total = len(mutants)
    if args.limit is not None and args.limit < total:  # a deterministic spread over both files
        step = total / args.limit
        mutants = [mutants[int(i * step)] for i in range(args.limit)]
    for m in mutants:
        folder = subs / m["folder"]
        folder.mkdir(exist_ok=True)
        for name in CONTRACT:
            shutil.copy2(ROOT / "solutions" / name, folder / name)
        (folder / m["file"]).write_text(m.pop("source"), encoding="utf-8")
    print(f"cosmic-ray: {total + skipped + invalid} mutants, {skipped} in annotations (skipped), "
          f"{invalid} not valid Python (incompetent), "
          f"grading {len(mutants)} + baseline with --jobs {args.jobs}", flush=True)

    # 3. One grader call for all of them (resumes from OUT/grade/ledger.sqlite).
    grade_seconds = grade([subs], out / "grade", args.jobs)
    rows = ledger_rows(out / "grade")
    base = rows.get(BASELINE)
    if base is None or base["status"] != "graded" or base["score"] < base["max_score"]:
        print(f"baseline (unmutated solutions/) did not get full marks: {dict(base) if base else None}")
        return 2

    # 4. Verdicts, back into the cosmic-ray session, and the report.
    equivalents = load_equivalents()
    used = set()
    killed, survived, equivalent, errored = [], [], [], []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for m in mutants:
            row = rows.get(m["folder"])
            if row is None or row["status"] != "graded":
                errored.append(m)
                db.set_result(m["job_id"], WorkResult(worker_outcome=WorkerOutcome.NORMAL, diff=m["diff"],
                                                      test_outcome=TestOutcome.INCOMPETENT,
                                                      output=row["reason"] if row else "not graded"))
                continue
            is_killed = row["score"] < row["max_score"]
            m["score"] = f'{row["score"]:g}/{row["max_score"]:g}'
            m["lost"] = lost_tests(row)
            db.set_result(m["job_id"], WorkResult(
                worker_outcome=WorkerOutcome.NORMAL, diff=m["diff"],
                test_outcome=TestOutcome.KILLED if is_killed else TestOutcome.SURVIVED,
                output=f'score {m["score"]}; lost: {m["lost"] or "-"}'))
            if is_killed:
                killed.append(m)
                continue
            entry = matching_entry(equivalents, m["file"], m["before"], m["after"])
            if entry is not None:
                used.add(id(entry))
                m["why"] = entry["why"]
                equivalent.append(m)
            else:
                survived.append(m)

    (out / "mutants.json").write_text(json.dumps(killed + equivalent + survived + errored, indent=1))
    for title, group in (("EQUIVALENT (listed in mutation/equivalent.toml)", equivalent),
                         ("TEST GAP (survived, not listed as equivalent)", survived),
                         ("ERRORED (the grader could not grade it; rerun)", errored)):
        if group:
            print(f"\n=== {title}: {len(group)}")
        for m in group:
            print(f'\n--- {m["folder"]}  {m["operator"]} #{m["occurrence"]}  ({m["file"]}:{m["line"]})')
            print(m["diff"])
            if "why" in m:
                print("why equivalent:", m["why"])
    stale = [e for e in equivalents if id(e) not in used]
    if stale and args.limit is None:
        print(f"\nnote: {len(stale)} entries of mutation/equivalent.toml matched no surviving mutant:")
        for e in stale:
            print(f'  {e["file"]}: {e["before"]!r} -> {e["after"]!r}')

    graded = len(killed) + len(survived)
    score = 100.0 * len(killed) / graded if graded else 100.0
    raw = 100.0 * len(killed) / (graded + len(equivalent)) if graded + len(equivalent) else 100.0
    print(f"\ncosmic-ray {__import__('importlib.metadata').metadata.version('cosmic-ray')}: "
          f"{total + skipped + invalid} mutants, {skipped} skipped (annotations), {invalid} not valid Python, "
          f"{len(mutants)} graded"
          f"{f' (sample of {total})' if len(mutants) < total else ''}: {len(killed)} killed, "
          f"{len(equivalent)} equivalent, {len(survived)} survived (test gaps), {len(errored)} errored")
    print(f"mutation score: {score:.1f}% of non-equivalent mutants killed "
          f"({raw:.1f}% counting equivalents as survivors); grading {grade_seconds:.0f} s, "
          f"total {time.monotonic() - started:.0f} s.  Details: {out / 'mutants.json'}, "
          f"cr-report {session}")
    return 1 if errored or score < args.fail_under else 0


if __name__ == "__main__":
    sys.exit(main())
