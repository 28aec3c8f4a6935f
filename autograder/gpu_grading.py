"""Grading the GPU part (staff, on a machine with an NVIDIA GPU).

``python -m autograder grade-gpu SUBMISSION... --out DIR [--dry]`` runs only the GPU
tests (:data:`autograder.rubric.GPU_ITEMS`, ``assignment/checks/test_gpu.py``) against
each submission, in the same sandboxed student process as the CPU grading but with
GPU-friendly limits (:func:`gpu_limits`: no address-space limit, which breaks CUDA;
longer calls), and writes

* ``DIR/<submission>/gpu_results.json``: score, rows (Gradescope's test format), device;
* ``DIR/gpu_gradebook.csv``: ``submission``, ``gpu_score``, ``gpu_max``, one column per
  GPU test, ``gpu_device``;
* ``DIR/merged_gradebook.csv`` when ``DIR/gradebook.csv`` (the CPU gradebook) is there,
  or ``--merge-with CPU.csv`` names one: see :func:`merge_gradebooks` and
  ``python -m autograder merge CPU.csv GPU.csv --out merged.csv``.

Submissions are found as the CPU batch finds them (:func:`autograder.inputs.discover`),
so both gradebooks name them alike and merge row by row.  A submission whose
``gpu_results.json`` exists is not graded again (rerun after an interruption), unless
``--force``.  ``--dry`` (or ``AMP_GPU_DRY=1``) runs the same path on the CPU, tiny and
without the speed assertion: CI uses it; its scores say nothing about speed.

Slurm: one GPU grades submissions one after another (timings must not share a GPU).
Where the GPUs sit behind Slurm, the batch grader's ``--executor slurm`` can run
:func:`grade_gpu_submission` (same arguments and result shape as
``autograder.worker.grade_submission``) per submission in a GPU job array, write each
result with :func:`write_submission_result`, and build the gradebook with
:func:`collect`.  Or, by hand: one ``sbatch --gres=gpu:1`` job per chunk of submissions,
each running ``grade-gpu`` into its own ``--out``, then ``merge``.

Import order: the sandbox's zygote is started before pytest is imported (as in the
CPU grading), and nothing here touches CUDA before it forks.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Sequence

from autograder import rubric
from autograder.files import csv_text, write_text_atomic

RESULTS_FILE, STAFF_FILE = "gpu_results.json", "gpu_staff.log"
GRADEBOOK, MERGED = "gpu_gradebook.csv", "merged_gradebook.csv"
DRY_ENV = "AMP_GPU_DRY"  # checks.gpu_scenarios.DRY_ENV (not imported here: it imports torch)
#: Limits of a GPU student process: CUDA needs a large address space (no RLIMIT_AS), threads and
#: files; the speed check asks for one long call.  ``$AMP_SANDBOX_LIMITS`` still overrides them.
GPU_LIMITS: dict[str, Any] = {
    "memory_bytes": None, "call_seconds": 120.0, "max_call_seconds": 900.0, "import_seconds": 60.0,
    "submission_seconds": 1800.0, "cpu_seconds": 3600, "processes": 512, "file_bytes": 256 * 2**20,
    "open_files": 1024,
}


def gpu_limits(**overrides: Any) -> Any:
    """``sandbox.Limits`` for GPU grading: :data:`GPU_LIMITS`, then ``$AMP_SANDBOX_LIMITS``, then ``overrides``."""
    from autograder import sandbox

    env = json.loads(os.environ.get("AMP_SANDBOX_LIMITS", "").strip() or "{}")
    known = {f.name for f in dataclasses.fields(sandbox.Limits)}
    fields = {k: v for k, v in {**GPU_LIMITS, **env, **overrides}.items() if k in known}
    return sandbox.Limits(**fields)


def gpu_max_points() -> float:
    return rubric.max_points(rubric.GPU_ITEMS)


def _device_name(dry: bool) -> str:
    import torch

    if dry:
        return "cpu (dry mode)"
    if torch.cuda.is_available():  # the judge process: the zygote has long been forked
        return torch.cuda.get_device_name()
    return "no CUDA"


def gpu_results(report: Any, dry: bool, name: str = "") -> dict[str, Any]:
    """The gpu_results.json object of one graded submission (rows as in Gradescope's results)."""
    from autograder import results

    data = results.gradescope_results(report, name)
    data["tests"] = [test for test in data["tests"] if test.get("number") in {i.number for i in rubric.GPU_ITEMS}]
    data["max_score"] = gpu_max_points()
    data["mode"] = "dry" if dry else "cuda"
    data["device"] = _device_name(dry)
    return data


def error_gpu_results(message: str, dry: bool) -> dict[str, Any]:
    rows = [{"name": f"{item.number} {item.title}", "number": item.number, "score": 0.0, "max_score": item.points,
             "status": "failed", "output": message, "visibility": item.visibility} for item in rubric.GPU_ITEMS]
    return {"score": 0.0, "max_score": gpu_max_points(), "execution_time": 0.0, "output": message, "tests": rows,
            "mode": "dry" if dry else "cuda", "device": ""}


def grade_gpu_submission(name: str, path: Path, hide: Sequence[str], limits: Any = None, uid: int | None = None,
                         *, dry: bool | None = None) -> dict[str, Any]:
    """Grade the GPU part of one folder/zip; never raises for the submission's faults.

    Same shape as ``autograder.worker.grade_submission``: ``status`` ("graded" or
    "errored"), ``reason``, ``results`` (the gpu_results.json object), ``staff_log``,
    ``seconds``.  The caller must have started the zygote before importing pytest.
    """
    from autograder import intake, judge
    from autograder.sandbox import SandboxRunner

    dry = dry if dry is not None else os.environ.get(DRY_ENV, "") not in ("", "0")
    if dry:
        os.environ[DRY_ENV] = "1"  # read by the GPU tests, in this (the judge's) process
    started = time.monotonic()
    try:
        staged = intake.stage(path)
    except intake.IntakeError as exc:
        return {"status": "errored", "reason": str(exc), "results": error_gpu_results(str(exc), dry),
                "staff_log": "", "seconds": round(time.monotonic() - started, 3)}
    runner = None
    try:
        runner = SandboxRunner(staged.folder, limits=limits or gpu_limits(), hide=tuple(hide), uid=uid)
        report = judge.grade_staged(runner, items=rubric.GPU_ITEMS, notes=staged.notes)
        data = gpu_results(report, dry, name)
        json.dumps(data, allow_nan=False)
        return {"status": "graded", "reason": "", "results": data, "staff_log": report.staff_log,
                "seconds": round(time.monotonic() - started, 3)}
    except Exception as exc:  # noqa: BLE001 - a grader fault must not stop the batch
        message = ("The grader could not grade the GPU part because of an internal problem (not your fault); "
                   "staff will regrade it.")
        return {"status": "errored", "reason": f"grader fault ({type(exc).__name__}: {exc})"[:500],
                "results": error_gpu_results(message, dry), "staff_log": traceback.format_exc(),
                "seconds": round(time.monotonic() - started, 3)}
    finally:
        if runner is not None:
            runner.close()
        shutil.rmtree(staged.folder, ignore_errors=True)


# --------------------------------------------------------------------------- files


def write_submission_result(out: Path, name: str, outcome: dict[str, Any]) -> None:
    """``out/<name>/gpu_results.json`` (and gpu_staff.log), atomically."""
    data = {**outcome["results"], "status": outcome["status"], "reason": outcome["reason"],
            "seconds": outcome["seconds"]}
    write_text_atomic(out / name / RESULTS_FILE, json.dumps(data, indent=2, allow_nan=False) + "\n")
    if outcome.get("staff_log"):
        write_text_atomic(out / name / STAFF_FILE, outcome["staff_log"])


def gradebook_header() -> list[str]:
    return (["submission", "gpu_score", "gpu_max"] + [f"{item.number} {item.test}" for item in rubric.GPU_ITEMS]
            + ["gpu_device"])


def gradebook_rows(graded: Sequence[tuple[str, dict[str, Any]]]) -> list[list[Any]]:
    """Rows of gpu_gradebook.csv from (submission name, gpu_results object), sorted by name."""
    rows = []
    for name, data in sorted(graded, key=lambda pair: pair[0]):
        scores = {test.get("number"): test.get("score", 0.0) for test in data.get("tests", [])}
        rows.append([name, data.get("score", 0.0), gpu_max_points()]
                    + [scores.get(item.number, 0.0) for item in rubric.GPU_ITEMS] + [data.get("device", "")])
    return rows


def collect(out: Path) -> Path:
    """Write ``out/gpu_gradebook.csv`` from every ``out/*/gpu_results.json``; return its path."""
    graded = [(path.parent.name, json.loads(path.read_text(encoding="utf-8")))
              for path in sorted(out.glob(f"*/{RESULTS_FILE}"))]
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
        if gpu is None:
            warnings.append(f"{row['submission']}: no GPU grade (total is the CPU score only)")
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


# --------------------------------------------------------------------------- commands


def cmd_grade_gpu(args: argparse.Namespace) -> int:
    from autograder import inputs
    from autograder.batch import private_paths

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    dry = bool(args.dry) or os.environ.get(DRY_ENV, "") not in ("", "0")
    if dry:
        os.environ[DRY_ENV] = "1"
    try:
        found = inputs.discover(args.submissions, out / ".inputs", exclude=[out])
    except inputs.InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for note in found.notes:
        print(note)
    todo = []
    for submission in found.submissions:
        if (out / submission.name / RESULTS_FILE).exists() and not args.force:
            print(f"{submission.name}: already graded (use --force to regrade)")
        else:
            todo.append(submission)
    if todo:
        from autograder.sandbox import start_zygote

        start_zygote()  # before pytest (imported by the judge) and before anything touches CUDA
        import torch

        if not dry and not torch.cuda.is_available():
            print("error: no CUDA device here (torch.cuda.is_available() is False). Run this on a GPU machine, "
                  "or add --dry to exercise the same path on the CPU.", file=sys.stderr)
            return 2
    limits = gpu_limits(**({"call_seconds": args.call_timeout} if args.call_timeout else {})) if todo else None
    hide = private_paths(out)
    for submission in todo:
        outcome = grade_gpu_submission(submission.name, submission.path, hide, limits, dry=dry)
        write_submission_result(out, submission.name, outcome)
        data = outcome["results"]
        failed = [t["number"] for t in data["tests"] if t.get("status") == "failed"]
        print(f"{submission.name}: {data['score']:g} / {gpu_max_points():g} on {data['device']}"
              + (f" (failed: {', '.join(failed)})" if failed else "")
              + (f" [{outcome['reason']}]" if outcome["status"] != "graded" else ""), flush=True)
    gradebook = collect(out)
    print(f"Wrote {gradebook}" + (" (dry mode: CPU, no speed check; not real GPU grades)" if dry else ""))
    cpu = args.merge_with or (out / "gradebook.csv")
    if args.merge_with or cpu.exists():
        for warning in merge_gradebooks(cpu, gradebook, out / MERGED):
            print(f"warning: {warning}", file=sys.stderr)
        print(f"Wrote {out / MERGED}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    try:
        warnings = merge_gradebooks(args.cpu, args.gpu, args.out)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"Wrote {args.out}")
    return 0


def add_subcommands(sub: Any) -> None:
    """Add ``grade-gpu`` and ``merge`` to the CLI's subparsers."""
    gpu = sub.add_parser("grade-gpu", help="grade the GPU part of submissions (on a GPU machine; --dry on the CPU)")
    gpu.add_argument("submissions", nargs="+", type=Path, metavar="SUBMISSION")
    gpu.add_argument("--out", type=Path, default=Path("out/grade"), help="output folder (default: out/grade)")
    gpu.add_argument("--dry", action="store_true", help="run on the CPU, tiny, without the speed assertion (CI)")
    gpu.add_argument("--force", action="store_true", help="regrade submissions that already have gpu_results.json")
    gpu.add_argument("--merge-with", type=Path, metavar="CPU.csv",
                     help="CPU gradebook to merge with (default: OUT/gradebook.csv when it exists)")
    gpu.add_argument("--call-timeout", type=float, metavar="S", help="seconds per student call without its own limit")
    gpu.set_defaults(func=cmd_grade_gpu)
    merge = sub.add_parser("merge", help="merge a CPU gradebook and a GPU gradebook into one CSV")
    merge.add_argument("cpu", type=Path, metavar="CPU.csv")
    merge.add_argument("gpu", type=Path, metavar="GPU.csv")
    merge.add_argument("--out", type=Path, required=True, help="merged CSV to write")
    merge.set_defaults(func=cmd_merge)
