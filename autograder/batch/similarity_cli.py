"""Command line of the similarity report: ``python -m autograder similarity DIR... --out OUT``
and the ``--similarity-*`` options of ``grade`` (see :mod:`autograder.batch.similarity`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError("must be between 0 and 1")
    return value


def _add_shared(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--similarity-threshold", type=_fraction, default=None, metavar="FRACTION",
                        help="flag pairs at or above this similarity (0-1; default: chosen from the data, the upper "
                             "outlier fence Q3 + 1.5 IQR of all pair scores kept between a floor and a ceiling, or "
                             "in a small class the floor: summary.md says which and its numbers, docs/batch.md why)")
    parser.add_argument("--similarity-reference", type=Path, action="append", metavar="DIR",
                        help="earlier submissions (e.g. last year's) to compare every submission with; repeatable")
    parser.add_argument("--no-similarity-solution", dest="similarity_solution", action="store_false", default=True,
                        help="do not compare every submission with the reference solution (solutions/; by default "
                             "a match is flagged as \"matches the reference solution\")")


def add_batch_options(grade: argparse.ArgumentParser) -> None:
    group = grade.add_argument_group("similarity report (similarity.csv, similarity.html, a section of summary.md)")
    group.add_argument("--no-similarity", dest="similarity", action="store_false", default=True,
                       help="skip the similarity report")
    _add_shared(group)  # type: ignore[arg-type]


def add_subcommand(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = sub.add_parser(
        "similarity", help="which submissions are suspiciously alike (similarity.csv and similarity.html)",
        description="Compare loss_scaler.py and amp_step.py of every pair of submissions (copydetect's winnowing: "
                    "robust to renaming, reformatting, comments and reordering; the skeleton's code does not "
                    "count). Writes OUT/similarity.csv and OUT/similarity.html and prints the flagged pairs. "
                    "PATH is read like `grade` reads it (folders, zips, Gradescope exports).")
    parser.add_argument("submissions", nargs="+", type=Path, metavar="PATH")
    parser.add_argument("--out", type=Path, default=Path("out/similarity"), help="output folder (out/similarity)")
    _add_shared(parser)
    parser.set_defaults(func=cmd_similarity)


def cmd_similarity(args: argparse.Namespace) -> int:
    from autograder.batch import inputs, similarity, summary

    out: Path = args.out.resolve()
    missing = [str(p) for p in [*args.submissions, *(args.similarity_reference or [])] if not p.exists()]
    if missing:
        print(f"error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    if out.exists() and not out.is_dir():
        print(f"error: --out {args.out} is a file", file=sys.stderr)
        return 2
    try:
        found = inputs.discover(args.submissions, out / ".inputs", exclude=[out], reserved=summary.RESERVED)
        references = inputs.discover(args.similarity_reference or [], out / ".inputs", exclude=[out])
    except inputs.InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for note in found.notes + references.notes:
        print(f"note: {note}", file=sys.stderr)
    try:
        report = similarity.analyse(found.submissions, references.submissions, args.similarity_threshold,
                                    solution=similarity.REFERENCE_SOLUTION if args.similarity_solution else None,
                                    torch_scaler=similarity.torch_scaler_source())
        out.mkdir(parents=True, exist_ok=True)
        similarity.write_outputs(out, report)
    except OSError as exc:
        print(f"error: cannot write the report into {args.out}: {exc}", file=sys.stderr)
        return 2
    print(similarity.markdown_section(report).strip())
    print(f"\nWrote {out / similarity.CSV_NAME}, {out / similarity.JSON_NAME} and {out / similarity.HTML_NAME} "
          f"({report.seconds:.1f} s).")
    return 0
