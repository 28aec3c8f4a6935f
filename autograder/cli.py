"""Command line: ``python -m autograder grade SUBMISSION... --out DIR`` and friends.

``grade`` takes submission folders and zips, folders or zips of them, and Gradescope
exports; it grades them in parallel worker processes (see :mod:`autograder.batch.run`),
resumably (rerun the same command after an interruption), and writes
``DIR/gradebook.csv``, ``DIR/<submission>/results.json`` and a summary.

Import order matters: each worker's sandbox zygote is forked before pytest, hypothesis
or any hidden test is imported, so student processes never hold them in memory.  This
module itself imports none of them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from autograder.engine import rubric, strings
from autograder.sandbox import budget, levels
from autograder import settings


def cmd_grade(args: argparse.Namespace) -> int:
    from autograder.batch import run as batch

    if args.language:  # the workers inherit it
        os.environ[settings.LANGUAGE.env] = args.language
    try:
        strings.language()
    except strings.UnknownLanguage as exc:
        print(f"error: ${settings.LANGUAGE.env}: {exc}", file=sys.stderr)
        return 2

    limits = {key: value for key, value in (("call_seconds", args.call_timeout), ("import_seconds", args.import_timeout),
                                            ("submission_seconds", args.submission_timeout)) if value is not None}
    slurm = {"cluster": args.slurm_cluster, "partition": args.slurm_partition, "time_min": args.slurm_time,
             "chunk": args.slurm_chunk, "parallelism": args.slurm_parallelism, "poll": args.slurm_poll,
             "mem_gb": args.slurm_mem_gb, "cpus": args.slurm_cpus}
    options = batch.Options(out=args.out, jobs=args.jobs or 0, force=args.force, retry_errored=args.retry_errored,
                            executor=args.executor, progress=args.progress, limits=limits,
                            max_per_worker=args.max_per_worker, slurm=slurm, similarity=args.similarity,
                            similarity_threshold=args.similarity_threshold,
                            similarity_reference=args.similarity_reference or (),
                            similarity_solution=args.similarity_solution, min_isolation=args.min_isolation,
                            roster=args.roster, same_sid=args.same_sid)
    try:
        status = batch.run(args.submissions, options)
    except batch.UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except batch.GraderFault as exc:
        print(f"grader fault: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nInterrupted. Every submission graded so far is saved in the ledger: run the same command again "
              "to grade the rest.", file=sys.stderr)
        return 130
    from autograder.gpu.gradebook import refresh_merged  # a merged CPU + GPU gradebook in OUT follows the new grades

    for line in refresh_merged(args.out.resolve()):
        print(line, file=sys.stderr if line.startswith("warning:") else sys.stdout)
    return status


def cmd_rubric(args: argparse.Namespace) -> int:
    if args.readme:  # the README's points table, rewritten from the rubric
        from autograder.engine import rubric_readme

        changed = rubric_readme.write(args.readme)
        print(f"{args.readme}: points table {'rewritten' if changed else 'already up to date'}")
        return 0
    for item in rubric.ITEMS + rubric.GPU_ITEMS:
        print(f"{item.number:>5}  {item.points:>4g}  {item.suite:<6}  {strings.title(item)}")
    print(strings.text("rubric.total", cpu=f"{rubric.max_points():g}", gpu=f"{rubric.GPU_PART_POINTS:g}"))
    return 0


def cmd_record_plan(args: argparse.Namespace) -> int:
    """Record the call plan from the reference solution into a file (what the Gradescope zip ships)."""
    from autograder.engine import grader

    grader.start()
    from autograder.engine import plan

    try:
        found = plan.record()
    except plan.ReferenceFails as exc:
        print(f"{exc}\nno plan written", file=sys.stderr)
        return 1
    args.write.write_text(found.to_json())
    print(f"wrote {args.write}: {len(found.cases)} cases, {sum(len(c.calls) for c in found.cases)} calls")
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description="Grade AMP assignment submissions.")
    sub = parser.add_subparsers(dest="command", required=True)
    grade = sub.add_parser(
        "grade", help="grade submissions (folders, .zip files, folders/zips of them, Gradescope exports)",
        description="Grade submissions in parallel into OUT: gradebook.csv, <submission>/results.json and "
                    "feedback.md, summary.md/json, score_histogram.png. Interrupted runs resume: run the same "
                    "command again. A PATH that holds loss_scaler.py/amp_step.py/answers.py is one submission; "
                    "otherwise each of its folders/zips is one (a Gradescope export's submission_metadata.yml "
                    "adds the students' names; so does --roster for GitHub Classroom's cloned repositories).")
    grade.add_argument("submissions", nargs="+", type=Path, metavar="PATH")
    grade.add_argument("--out", type=Path, default=Path("out/grade"), help="output folder (default: out/grade)")
    grade.add_argument("--jobs", "-j", type=_positive_int, default=None,
                       help="worker processes (default: one per core)")
    grade.add_argument("--force", action="store_true", help="regrade everything, even what the ledger has")
    grade.add_argument("--roster", type=Path, default=None, metavar="CSV",
                       help="GitHub Classroom's roster (classroom_roster.csv): names the cloned repositories "
                            "(<assignment>-<github username>) after their students")
    from autograder.batch.inputs import SAME_SID_CHOICES  # light: no torch

    grade.add_argument("--same-sid", choices=SAME_SID_CHOICES, default=SAME_SID_CHOICES[0],
                       help="when a Gradescope export holds several submissions of one SID: grade the latest by "
                            "created_at (default; the others are listed as superseded, with no score), the "
                            "earliest, or all of them; each such SID is said in the console, summary.md and report.html")
    grade.add_argument("--language", choices=strings.LANGUAGES, default=None,
                       help=f"language of row titles and fixed feedback (default: ${settings.LANGUAGE.env}, else en; "
                            "--force to regrade what the ledger has in another language)")
    grade.add_argument("--retry-errored", action="store_true", help="regrade the submissions that could not be graded")
    grade.add_argument("--executor", choices=("local", "slurm"), default="local",
                       help="local worker processes (default) or a Slurm job array via submitit")
    progress = grade.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None,
                          help="show the progress bar: ETA and counts of graded, failed (graded, lost points) "
                               "and errored (could not be graded) submissions (default: only on a terminal)")
    progress.add_argument("--no-progress", dest="progress", action="store_false")
    limits = grade.add_argument_group("limits per submission (seconds; defaults: the sandbox's)")
    limits.add_argument("--call-timeout", type=_positive_float,
                        help=f"one call into student code ({budget.CALL_SECONDS:g})")
    limits.add_argument("--import-timeout", type=_positive_float,
                        help=f"importing one student file ({budget.IMPORT_SECONDS:g})")
    limits.add_argument("--submission-timeout", type=_positive_float,
                        help=f"the wall-time budget of one submission, intake included; after it the remaining tests "
                             f"fail with 'time budget used up' and the submission is still graded "
                             f"({budget.SUBMISSION_SECONDS:g})")
    grade.add_argument("--min-isolation", choices=levels.LEVELS, default=None,
                       help="refuse to grade (exit 2) if student code would run less isolated than this here "
                            f"(weakest first: {', '.join(levels.LEVELS)}; default: ${settings.MIN_ISOLATION.env} "
                            f"or {levels.SEALED}, the weakest level that seals student processes from each other; "
                            "a lower level graded by name is reported as unsealed)")
    grade.add_argument("--max-per-worker", type=_positive_int, default=200, help=argparse.SUPPRESS)
    slurm = grade.add_argument_group("Slurm (--executor slurm)")
    slurm.add_argument("--slurm-partition", help="partition to submit to")
    slurm.add_argument("--slurm-time", type=_positive_int, default=60, help="minutes per array task (60)")
    slurm.add_argument("--slurm-chunk", type=_positive_int, default=20, help="submissions per array task (20)")
    slurm.add_argument("--slurm-parallelism", type=_positive_int, default=64, help="array tasks at once (64)")
    slurm.add_argument("--slurm-mem-gb", type=_positive_float, default=8.0,
                       help="memory per array task, GB (8); lower it on nodes with less")
    slurm.add_argument("--slurm-cpus", type=_positive_int, default=2, help="CPUs per array task (2)")
    slurm.add_argument("--slurm-cluster", choices=("slurm", "local"), default="slurm",
                       help=argparse.SUPPRESS)  # "local": submitit's local executor (tests)
    slurm.add_argument("--slurm-poll", type=_positive_float, default=5.0, help=argparse.SUPPRESS)
    from autograder.batch import similarity_cli  # the similarity report (also a section of every batch run)

    similarity_cli.add_batch_options(grade)
    grade.set_defaults(func=cmd_grade)
    show = sub.add_parser("rubric", help="print the tests and their points")
    show.add_argument("--readme", type=Path, metavar="README",
                      help="instead, rewrite the points table in README (between its markers) from the rubric")
    show.set_defaults(func=cmd_rubric)
    record = sub.add_parser("record-plan", help="record the call plan from solutions/ into --write FILE "
                                                "(make autograder ships it in the zip)")
    record.add_argument("--write", type=Path, required=True)
    record.set_defaults(func=cmd_record_plan)
    from autograder.gpu import cli as gpu_cli  # grade-gpu and merge (the GPU part, graded by staff on a GPU)

    gpu_cli.add_subcommands(sub)
    similarity_cli.add_subcommand(sub)
    from autograder.diagnosis import cli as diagnosis_cli  # report OUT: rebuild the class report from a batch's files

    diagnosis_cli.add_report_subcommand(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))
