"""``python -m autograder.diagnosis build --out FILE [--public] [--bugs NAME,...]`` and ``... report OUT``.

``build`` writes a diagnosis table; ``report`` (re)writes a batch folder's class report
(:mod:`autograder.diagnosis.report`).

Records (or reads the shipped) call plan, then answers its calls with every catalogued bug
(:mod:`autograder.diagnosis.table`).  ``--public`` keeps only the public tests' cases: the
student-side table, safe to hand out with the public checks.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.diagnosis", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="answer the call plan with every catalogued bug; write the table")
    build.add_argument("--out", type=Path, required=True)
    build.add_argument("--public", action="store_true", help="public tests only (the student-side table)")
    build.add_argument("--bugs", default="", help="comma-separated bug names (default: every catalogued bug)")
    build.add_argument("--variants", default="", help="comma-separated correct variants to record too, or 'all' "
                       "(never diagnosed; the tests check no bug answers like one)")
    build.add_argument("--quiet", action="store_true")
    report = sub.add_parser("report", help="(re)write report.html, items.csv and mistakes.csv of a batch folder")
    report.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "report":
        from autograder.diagnosis import report as class_report

        if not (args.out / "gradebook.csv").is_file():
            print(f"error: {args.out} holds no gradebook.csv (run python -m autograder grade first)", file=sys.stderr)
            return 2
        class_report.write(args.out)
        print(f"wrote {args.out / class_report.HTML_NAME}, {class_report.ITEMS_NAME}, {class_report.MISTAKES_NAME}")
        return 0

    from autograder.engine.sandbox import start_zygote

    start_zygote()  # before pytest and the hidden tests are imported
    from autograder.diagnosis import table
    from autograder.engine import plan, rubric

    started = time.monotonic()
    try:
        found = plan.current_plan()
    except plan.ReferenceFails as exc:
        print(f"{exc}\nno diagnosis table written", file=sys.stderr)
        return 1
    if found is None:
        print("no call plan (AMP_PLAN=off?): no diagnosis table written", file=sys.stderr)
        return 1
    catalogue = table.load_catalogue()
    wanted = {name for name in args.bugs.split(",") if name}
    unknown = wanted - {entry.name for entry in catalogue.BUGS}
    if unknown:
        print(f"error: no catalogued bug named {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    bugs = [entry for entry in catalogue.BUGS if not wanted or entry.name in wanted]
    variants = {name for name in args.variants.split(",") if name}
    unknown = variants - {entry.name for entry in catalogue.VARIANTS} - {"all"}
    if unknown:
        print(f"error: no catalogued variant named {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    bugs += [entry for entry in catalogue.VARIANTS if "all" in variants or entry.name in variants]
    public = {item.test for item in rubric.ITEMS if item.suite == rubric.PUBLIC} if args.public else None
    built = table.build(found, bugs, tests=public, progress=None if args.quiet else print)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(built.to_json(), encoding="utf-8")
    print(f"wrote {args.out}: {len(bugs)} entries, {len(built.cases)} cases, {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
