"""The GPU part's command lines: ``grade-gpu`` (preflight, canary, every submission, the gradebooks) and ``merge``.

What each step does is :mod:`autograder.gpu.grading`; this module turns the arguments into those steps and says
what happened, one line per submission.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from autograder import settings
from autograder.sandbox import levels
from autograder.engine.files import write_text_atomic
from autograder.gpu.gradebook import (DRY_STATUS, MERGED, RESULTS_FILE, UNGRADED, collect, gpu_max_points,
                                      merge_gradebooks, write_lms_scores, write_submission_result)
from autograder.gpu.grading import gpu_limits, grade_gpu_submission, limit_warnings, resolve_dry, run_canary
from checks.gpu_mode import DRY_ENV, parse_dry

PREFLIGHT_FILE = "gpu_preflight.json"


def cmd_grade_gpu(args: argparse.Namespace) -> int:
    from autograder.batch import inputs
    from autograder.engine.grader import private_paths
    from autograder.gpu.preflight import PreflightFailed, preflight
    from autograder.sandbox.uids import block, claim_uid, kill_uid

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    try:
        dry = resolve_dry(args.dry)
    except ValueError as exc:  # a bad $AMP_GPU_DRY
        print(f"error: {DRY_ENV}: {exc}", file=sys.stderr)
        return 2
    try:
        found = inputs.discover(args.submissions, out / ".inputs", exclude=[out])
        if args.roster:  # names for GitHub Classroom's cloned repositories, in gpu_scores.csv
            from autograder.batch import roster

            roster.name_submissions(found, roster.read_roster(args.roster))
    except (inputs.InputError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for note in found.notes:
        print(note)
    todo = []
    for submission in found.submissions:
        if submission.withheld:  # nothing to grade (an empty upload, one superseded): no GPU row, as no CPU score
            print(f"{submission.name}: not graded ({submission.withheld})")
            continue
        done = out / submission.name / RESULTS_FILE
        if done.exists() and not args.force and json.loads(done.read_text(encoding="utf-8")).get("status") != "errored":
            print(f"{submission.name}: already graded (use --force to regrade)")
        else:
            todo.append(submission)
    if todo or args.preflight_only:
        from autograder.engine import grader
        from checks.judge.gpu_reference import ReferenceProcess

        grader.start(import_dynamo=True)  # before anything touches CUDA
        for warning in limit_warnings():
            print(f"warning: {warning}", file=sys.stderr)
        limits = gpu_limits(**({"call_seconds": args.call_timeout} if args.call_timeout else {}))
        hide = private_paths(out)
        claimed = claim_uid(os.getpid())  # machine-wide, as the batch workers claim theirs
        uid = claimed[0] if claimed else None
        reference = None
        try:
            try:
                setup = preflight(dry, limits, uid, hide, min_isolation=args.min_isolation)
            except PreflightFailed as exc:
                _write_preflight(out, False, f"GPU preflight failed: {exc}", found=exc.facts)
                print(f"GPU preflight failed: {exc}", file=sys.stderr)
                return 1
            line = (f"GPU preflight: ok ({setup.device_name}, compute mode {setup.compute_mode}, isolation "
                    f"{setup.isolation}" + (", one CUDA process at a time" if setup.exclusive else "") + ")")
            warning = levels.unsealed_warning(setup.isolation, gpu=True)
            if warning:
                print(warning, file=sys.stderr)
            _write_preflight(out, True, line, setup)
            print(line, flush=True)
            if args.preflight_only:
                return 0
            reference = ReferenceProcess(one_call=setup.exclusive)  # shared: the fp32 reference is computed once
            try:
                print(run_canary(out, hide, limits, uid, setup, reference), flush=True)
            except PreflightFailed as exc:
                print(f"GPU canary failed, nobody graded: {exc}", file=sys.stderr)
                return 1
            for submission in todo:
                outcome = grade_gpu_submission(submission.name, submission.path, hide, limits, uid, setup=setup,
                                               reference=reference)
                write_submission_result(out, submission.name, outcome)
                _print_outcome(submission.name, outcome)
        finally:
            if reference is not None:
                reference.close()
            if claimed:
                kill_uid(*block(claimed[0]))
                claimed[1].close()
    gradebook = collect(out)
    print(f"Wrote {gradebook}" + (f" ({DRY_STATUS}: CPU, no speed check)" if dry else ""))
    students = {s.name: [(p.name or p.email or p.sid, p.sid, p.email) for p in s.submitters] for s in found.submissions}
    print(f"Wrote {write_lms_scores(out, students)} (for the LMS: docs/platforms.md"
          + (f"; {DRY_STATUS}: no score in it" if dry else "") + ")")
    cpu = args.merge_with or (out / "gradebook.csv")
    if args.merge_with or cpu.exists():
        for warning in merge_gradebooks(cpu, gradebook, out / MERGED):
            print(f"warning: {warning}", file=sys.stderr)
        print(f"Wrote {out / MERGED}")
    if (out / "gradebook.csv").is_file():  # the CPU batch's class report shows the GPU part from now on
        from autograder.diagnosis import report_html

        report_html.write_for_batch(out)
    return 0


def _print_outcome(name: str, outcome: dict[str, Any]) -> None:
    data = outcome["results"]
    if outcome["status"] != "graded":
        print(f"{name}: {UNGRADED} [{outcome['reason']}]", flush=True)
        return
    failed = [t["number"] for t in data["tests"] if t.get("status") == "failed"]
    print(f"{name}: {data['score']:g} / {gpu_max_points():g} on {data['device']}"
          + (f" (failed: {', '.join(failed)})" if failed else ""), flush=True)


def _dry_flag(text: str) -> bool:
    try:
        return parse_dry(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
    gpu.add_argument("--dry", nargs="?", const=True, default=None, type=_dry_flag, metavar="VALUE",
                     help="run on the CPU, tiny, without the speed assertion (CI); --dry 0/false/no: the real GPU run "
                          "(default: $AMP_GPU_DRY, else real)")
    gpu.add_argument("--preflight-only", action="store_true", help="check the device (OUT/gpu_preflight.json) and stop")
    gpu.add_argument("--force", action="store_true", help="regrade submissions that already have gpu_results.json")
    gpu.add_argument("--merge-with", type=Path, metavar="CPU.csv",
                     help="CPU gradebook to merge with (default: OUT/gradebook.csv when it exists)")
    gpu.add_argument("--roster", type=Path, default=None, metavar="CSV",
                     help="GitHub Classroom's roster (classroom_roster.csv): the students of cloned repositories, for "
                          "gpu_scores.csv")
    gpu.add_argument("--call-timeout", type=float, metavar="S", help="seconds per student call without its own limit")
    gpu.add_argument("--min-isolation", choices=levels.LEVELS, default=None,
                     help="the preflight refuses to grade if GPU student code would run less isolated than this "
                          f"(default: ${settings.MIN_ISOLATION.env} or {levels.SEALED}); a GPU process is sealed only at namespaces "
                          "(root with CAP_SYS_ADMIN): CUDA does not start under Landlock")
    gpu.set_defaults(func=cmd_grade_gpu)
    merge = sub.add_parser("merge", help="merge a CPU gradebook and a GPU gradebook into one CSV")
    merge.add_argument("cpu", type=Path, metavar="CPU.csv")
    merge.add_argument("gpu", type=Path, metavar="GPU.csv")
    merge.add_argument("--out", type=Path, required=True, help="merged CSV to write")
    merge.set_defaults(func=cmd_merge)


def _write_preflight(out: Path, ok: bool, line: str, setup: Any = None, found: dict[str, Any] | None = None) -> None:
    facts: dict[str, Any] = {"ok": ok, "line": line}
    if found:
        facts["facts"] = found  # what the student process reported, when the preflight failed
    if setup is not None:
        facts.update(device=setup.device_name, compute_mode=setup.compute_mode, exclusive=setup.exclusive,
                     isolation=setup.isolation,
                     mode="dry" if setup.dry else "cuda", facts=setup.facts)
    write_text_atomic(out / PREFLIGHT_FILE, json.dumps(facts, indent=2, default=str) + "\n")
