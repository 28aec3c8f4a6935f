"""Command line: ``python -m autograder grade SUBMISSION... --out DIR`` and friends.

Import order matters: the sandbox's zygote is forked before pytest, hypothesis or
any hidden test is imported, so student processes never hold them in memory.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from autograder import rubric

ROOT = Path(__file__).resolve().parent.parent


def private_paths(out: Path, extra: Sequence[Path] = ()) -> tuple[str, ...]:
    """Folders a student process must not see (covered by empty mounts where possible)."""
    candidates = [ROOT / "autograder", ROOT / "solutions", ROOT / "tests", out, Path("/autograder/results"),
                  Path("/autograder/source/autograder"), *extra]
    return tuple(sorted({str(p.resolve()) for p in candidates if p.exists()}))


def submission_name(path: Path, taken: set[str]) -> str:
    base = path.stem if path.suffix.lower() == ".zip" else path.name
    base = "".join(c if c.isalnum() or c in "-_." else "_" for c in base).strip(".") or "submission"
    name, counter = base, 1
    while name in taken:
        counter += 1
        name = f"{base}-{counter}"
    taken.add(name)
    return name


def grade_one(path: Path, out: Path, extra_private: Sequence[Path] = ()) -> dict[str, Any]:
    """Grade one folder/zip; return its results.json object (never raises for bad submissions)."""
    from autograder import intake, judge, results
    from autograder.sandbox import SandboxRunner

    try:
        staged = intake.stage(path)
    except intake.IntakeError as exc:
        return results.error_results(str(exc))
    runner = SandboxRunner(staged.folder, hide=private_paths(out, extra_private))
    try:
        report = judge.grade_staged(runner, notes=staged.notes)
    finally:
        runner.close()
        import shutil
        shutil.rmtree(staged.folder, ignore_errors=True)
    data = results.gradescope_results(report, path.name)
    data["_staff_log"] = report.staff_log
    return data


def gradebook_rows(graded: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[list[Any]]]:
    header = ["submission", "score", "max_score"] + [f"{item.number} {item.test}" for item in rubric.ITEMS]
    rows = []
    for name, data in graded:
        scores = {test.get("number"): test.get("score", 0.0) for test in data["tests"]}
        rows.append([name, data["score"], rubric.max_points()] + [scores.get(item.number, 0.0) for item in rubric.ITEMS])
    return header, rows


def write_csv_atomic(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    from autograder.results import write_text_atomic

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    write_text_atomic(path, buffer.getvalue())


def print_table(graded: list[tuple[str, dict[str, Any]]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Grades (CPU part, out of {rubric.max_points():g}; GPU part graded separately)")
    for column in ("submission", "score", "failed tests"):
        table.add_column(column)
    for name, data in graded:
        failed = [t["number"] for t in data["tests"] if t.get("status") == "failed"]
        table.add_row(name, f"{data['score']:g} / {rubric.max_points():g}", ", ".join(failed) or "-")
    Console(file=sys.stdout, width=120).print(table)


def cmd_grade(args: argparse.Namespace) -> int:
    missing = [p for p in args.submissions if not p.exists()]
    if missing:
        print(f"error: no such file or folder: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    from autograder.sandbox import start_zygote

    start_zygote()
    from autograder.results import write_json_atomic

    out: Path = args.out
    taken: set[str] = set()
    graded = []
    for path in args.submissions:
        name = submission_name(path, taken)
        data = grade_one(path, out)
        staff_log = data.pop("_staff_log", "")
        write_json_atomic(out / name / "results.json", data)
        if staff_log:
            (out / name / "staff.log").write_text(staff_log, encoding="utf-8")
        graded.append((name, data))
    header, rows = gradebook_rows(graded)
    write_csv_atomic(out / "gradebook.csv", header, rows)
    print_table(graded)
    print(f"Wrote {out / 'gradebook.csv'} and {len(graded)} results.json file(s).")
    return 0


def cmd_rubric(_: argparse.Namespace) -> int:
    for item in rubric.ITEMS + rubric.GPU_ITEMS:
        print(f"{item.number:>5}  {item.points:>4g}  {item.suite:<6}  {item.title}")
    print(f"total CPU {rubric.max_points():g} + GPU {rubric.GPU_PART_POINTS:g}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description="Grade AMP assignment submissions.")
    sub = parser.add_subparsers(dest="command", required=True)
    grade = sub.add_parser("grade", help="grade submissions (folders or .zip files)")
    grade.add_argument("submissions", nargs="+", type=Path, metavar="SUBMISSION")
    grade.add_argument("--out", type=Path, default=Path("out/grade"), help="output folder (default: out/grade)")
    grade.set_defaults(func=cmd_grade)
    show = sub.add_parser("rubric", help="print the tests and their points")
    show.set_defaults(func=cmd_rubric)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))
