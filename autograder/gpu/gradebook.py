"""The GPU part's files: ``<submission>/gpu_results.json``, ``gpu_gradebook.csv``, the merge with the CPU one and
``gpu_scores.csv``, the GPU points in the shape an LMS imports them (Canvas's gradebook import; docs/platforms.md).

A submission that could not be graded (``status`` "errored" in its gpu_results.json)
gets empty score cells and ``gpu_status`` "could not be graded: <why>" -- never a zero --
and the merge warns about it.  A dry run's rows (``--dry``: on the CPU, no speed check) keep their scores for CI
but their ``gpu_status`` is :data:`DRY_STATUS`: the merge gives them no total and gpu_scores.csv no score.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Sequence

from autograder.diagnosis.report import (DRY_STATUS, GPU_GRADEBOOK_NAME as GRADEBOOK, GPU_RESULTS_NAME as RESULTS_FILE,
                                         GRADED, UNGRADED)
from autograder.engine import rubric
from autograder.engine.files import csv_text, write_text_atomic

STAFF_FILE = "gpu_staff.log"
MERGED, LMS_SCORES = "merged_gradebook.csv", "gpu_scores.csv"
#: gpu_scores.csv's columns: Canvas's gradebook import matches a row to a student by its Student, ID, SIS User ID,
#: SIS Login ID and Section columns, and takes each other column as an assignment's scores (docs/platforms.md)
LMS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "GPU part", "GPU status"]


def gpu_max_points() -> float:
    return rubric.max_points(rubric.GPU_ITEMS)


def write_submission_result(out: Path, name: str, outcome: dict[str, Any]) -> None:
    """``out/<name>/gpu_results.json`` (and gpu_staff.log), atomically."""
    data = {**outcome["results"], "status": outcome["status"], "reason": outcome["reason"],
            "seconds": outcome["seconds"]}
    write_text_atomic(out / name / RESULTS_FILE, json.dumps(data, indent=2, allow_nan=False) + "\n")
    if outcome.get("staff_log"):
        write_text_atomic(out / name / STAFF_FILE, outcome["staff_log"])


def gradebook_header() -> list[str]:
    return (["submission", "gpu_score", "gpu_max"] + [f"{item.number} {item.test}" for item in rubric.GPU_ITEMS]
            + ["gpu_device", "gpu_status"])


def gradebook_rows(graded: Sequence[tuple[str, dict[str, Any]]]) -> list[list[Any]]:
    """Rows of gpu_gradebook.csv from (submission name, gpu_results object), sorted by name.

    A submission that could not be graded gets empty score cells and its reason, never a zero.
    """
    rows = []
    for name, data in sorted(graded, key=lambda pair: pair[0]):
        if data.get("status") == "errored":
            rows.append([name, "", gpu_max_points()] + [""] * len(rubric.GPU_ITEMS)
                        + [data.get("device", ""), f"{UNGRADED}: {data.get('reason', '')}"])
            continue
        scores = {test.get("number"): test.get("score", 0.0) for test in data.get("tests", [])}
        rows.append([name, data.get("score", 0.0), gpu_max_points()]
                    + [scores.get(item.number, 0.0) for item in rubric.GPU_ITEMS]
                    + [data.get("device", ""), DRY_STATUS if data.get("mode") == "dry" else GRADED])
    return rows


def collect(out: Path) -> Path:
    """Write ``out/gpu_gradebook.csv`` from every ``out/*/gpu_results.json`` (not the canary's); return its path."""
    graded = [(path.parent.name, json.loads(path.read_text(encoding="utf-8")))
              for path in sorted(out.glob(f"*/{RESULTS_FILE}")) if not path.parent.name.startswith(".")]
    target = out / GRADEBOOK
    write_text_atomic(target, csv_text(gradebook_header(), gradebook_rows(graded)))
    return target


def _read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as stream:
        reader = csv.DictReader(stream)
        return list(reader.fieldnames or []), list(reader)


def _number(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "") else 0.0
    except ValueError:
        return 0.0


def merge_gradebooks(cpu_csv: Path, gpu_csv: Path, out_csv: Path) -> list[str]:
    """Join the CPU gradebook and the GPU one on ``submission``; return warnings for the TA.

    The merged file has the CPU columns, then the GPU columns, then ``total`` and
    ``total_max`` (CPU score + GPU score).  A CPU row without a GPU row keeps empty GPU
    cells (its total is the CPU score alone, and a warning says so); GPU rows without a
    CPU row are appended, also with a warning.
    """
    cpu_header, cpu_rows = _read_csv(cpu_csv)
    gpu_header, gpu_rows = _read_csv(gpu_csv)
    for header, path, needed in ((cpu_header, cpu_csv, ("submission", "score", "max_score")),
                                 (gpu_header, gpu_csv, ("submission", "gpu_score", "gpu_max"))):
        missing = [column for column in needed if column not in header]
        if missing:
            raise ValueError(f"{path} has no column {', '.join(missing)}: is it the right gradebook?")
    gpu_columns = [column for column in gpu_header if column not in cpu_header]
    by_name = {row["submission"]: row for row in gpu_rows}
    warnings: list[str] = []
    merged: list[list[Any]] = []
    gpu_max = max((_number(row["gpu_max"]) for row in gpu_rows), default=gpu_max_points())
    for row in cpu_rows:
        gpu = by_name.pop(row["submission"], None)
        if row.get("status", "") not in ("", GRADED):  # no CPU score (not graded, nothing submitted): no total either
            warnings.append(f"{row['submission']}: CPU part {row['status']} (no total)")
            merged.append([row.get(c, "") for c in cpu_header] + [gpu.get(c, "") if gpu else "" for c in gpu_columns]
                          + ["", _number(row["max_score"]) + gpu_max])
            continue
        if gpu is not None and gpu.get("gpu_status") == DRY_STATUS:  # scores that are no grade: no total
            warnings.append(f"{row['submission']}: GPU part {DRY_STATUS} (no total)")
            merged.append([row.get(c, "") for c in cpu_header] + [gpu.get(c, "") for c in gpu_columns]
                          + ["", _number(row["max_score"]) + gpu_max])
            continue
        if gpu is None:
            warnings.append(f"{row['submission']}: no GPU grade (total is the CPU score only)")
        elif gpu.get("gpu_status", "").startswith(UNGRADED):
            warnings.append(f"{row['submission']}: GPU part {gpu['gpu_status']} (total is the CPU score only)")
        total = _number(row["score"]) + (_number(gpu["gpu_score"]) if gpu else 0.0)
        merged.append([row.get(c, "") for c in cpu_header] + [gpu.get(c, "") if gpu else "" for c in gpu_columns]
                      + [round(total, 4), _number(row["max_score"]) + gpu_max])
    for name, gpu in sorted(by_name.items()):
        warnings.append(f"{name}: GPU grade but no CPU grade")
        merged.append([gpu["submission"] if c == "submission" else "" for c in cpu_header]
                      + [gpu.get(c, "") for c in gpu_columns] + [round(_number(gpu["gpu_score"]), 4), ""])
    header = cpu_header + gpu_columns + ["total", "total_max"]
    write_text_atomic(out_csv, csv_text(header, merged))
    return warnings


def lms_rows(gpu_csv: Path, students: dict[str, Sequence[tuple[str, str, str]]]) -> list[list[Any]]:
    """gpu_scores.csv's rows: one per student (each of a group's students gets the group's score), in
    gpu_gradebook.csv's order; ``students`` maps a submission to its (name, SID, email) triples (none known: the
    submission's name stands for its student).  A score is given only for a row graded for real: a dry run's, and
    one that could not be graded, leave it empty and say why in the status, never a zero."""
    _, rows = _read_csv(gpu_csv)
    table = []
    for row in rows:
        status = row.get("gpu_status", "")
        score = row.get("gpu_score", "") if status == GRADED else ""
        for name, sid, email in students.get(row["submission"]) or [(row["submission"], "", "")]:
            table.append([name, "", sid, email, "", score, status])
    return table


def write_lms_scores(out: Path, students: dict[str, Sequence[tuple[str, str, str]]]) -> Path:
    """``out/gpu_scores.csv`` from ``out/gpu_gradebook.csv`` (:func:`lms_rows`); its path."""
    target = out / LMS_SCORES
    write_text_atomic(target, csv_text(LMS_HEADER, lms_rows(out / GRADEBOOK, students)))
    return target


def refresh_merged(out: Path) -> list[str]:
    """After a CPU run into ``out``: bring ``out/merged_gradebook.csv`` up to date; the lines to tell the TA.

    The merged file sums the CPU and GPU gradebooks; a CPU (re)grade changes the first, so a merged file left as
    it was would publish old totals.  It is merged again from the new ``gradebook.csv`` and the
    ``gpu_gradebook.csv`` beside it (the GPU grades as ``grade-gpu`` left them); without one there, it cannot be,
    and the TA is warned.  Nothing is said when the merge did not change.
    """
    merged, cpu, gpu = out / MERGED, out / "gradebook.csv", out / GRADEBOOK
    if not merged.is_file() or not cpu.is_file():
        return []
    if not gpu.is_file():
        return [f"warning: {merged} is stale: it holds the totals of an earlier {cpu.name}, and there is no {GRADEBOOK} "
                f"in {out} to merge again (python -m autograder merge {cpu} GPU.csv --out {merged})"]
    before = merged.read_bytes()
    try:
        warnings = merge_gradebooks(cpu, gpu, merged)
    except (OSError, ValueError) as exc:
        return [f"warning: {merged} is stale and could not be merged again: {exc}"]
    if merged.read_bytes() == before:
        return []
    return ([f"Updated {merged} from the new {cpu.name} and {GRADEBOOK} (GPU grades as grade-gpu left them: run "
             "grade-gpu again for submissions whose files changed)"] + [f"warning: {w}" for w in warnings])
