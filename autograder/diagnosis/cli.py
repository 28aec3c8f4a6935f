"""Command line of the diagnosis: ``build`` (a table) and ``report`` (a batch's class report).

``python -m autograder.diagnosis build --out FILE [--public] [--bugs NAME,...] [--variants NAME,...|all]``
records (or reads the shipped) call plan, then answers its calls with every catalogued bug
(:mod:`autograder.diagnosis.table`); ``--public`` keeps only the public tests' cases, with their calls:
the students' table, safe to hand out with the public checks.

``python -m autograder.diagnosis report OUT`` (also ``python -m autograder report OUT``) rewrites a batch
folder's report.html, items.csv and mistakes.csv (:mod:`autograder.diagnosis.report`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any


def _names(text: str) -> set[str]:
    return {name for name in text.split(",") if name}


def cmd_build(args: argparse.Namespace) -> int:
    from autograder.diagnosis.table import load_catalogue

    catalogue = load_catalogue()  # names checked before the plan is recorded (that takes a grading)
    wanted, variants = _names(args.bugs), _names(args.variants)
    unknown = (wanted - {e.name for e in catalogue.BUGS}) | (variants - {e.name for e in catalogue.VARIANTS} - {"all"})
    if unknown:
        print(f"error: no catalogued entry named {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    entries = [e for e in catalogue.BUGS if not wanted or e.name in wanted]
    entries += [e for e in catalogue.VARIANTS if "all" in variants or e.name in variants]

    from autograder.engine import grader

    grader.start()
    from autograder.diagnosis import table
    from autograder.engine import plan

    started = time.monotonic()
    try:
        found = plan.current_plan()
    except plan.ReferenceFails as exc:
        print(f"{exc}\nno diagnosis table written", file=sys.stderr)
        return 1
    if found is None:
        print("no call plan (AMP_PLAN=off?): no diagnosis table written", file=sys.stderr)
        return 1
    public = table.public_tests() if args.public else None
    built = table.build(found, entries, tests=public, progress=None if args.quiet else print)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(built.to_json(), encoding="utf-8")
    print(f"wrote {args.out}: {len(entries)} entries, {len(built.cases)} cases, {time.monotonic() - started:.0f} s")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from autograder.diagnosis import report, report_html

    if not (args.out / "gradebook.csv").is_file():
        print(f"error: {args.out} holds no gradebook.csv (run python -m autograder grade first)", file=sys.stderr)
        return 2
    report_html.write(args.out)
    print(f"wrote {args.out / report.HTML_NAME}, {report.ITEMS_NAME} and {report.MISTAKES_NAME}")
    return 0


def add_report_subcommand(sub: Any) -> None:
    """``report OUT`` (here and in ``python -m autograder``)."""
    parser = sub.add_parser("report", help="(re)write report.html, items.csv and mistakes.csv of a batch folder")
    parser.add_argument("out", type=Path)
    parser.set_defaults(func=cmd_report)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.diagnosis", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="answer the call plan with every catalogued bug; write the table")
    build.add_argument("--out", type=Path, required=True)
    build.add_argument("--public", action="store_true", help="public tests only, with their calls (the students')")
    build.add_argument("--bugs", default="", help="comma-separated bug names (default: every catalogued bug)")
    build.add_argument("--variants", default="", help="comma-separated correct variants to record too, or 'all' "
                       "(never diagnosed; the tests check that no bug answers like one)")
    build.add_argument("--quiet", action="store_true")
    build.set_defaults(func=cmd_build)
    add_report_subcommand(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))
