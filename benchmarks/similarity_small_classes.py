"""The similarity report's default threshold on small classes of independent students (docs/batch.md).

Every class of 5, 7 and 9 (``--sizes``) is drawn from the independently written correct submissions in
``tests/fixtures/independent`` (90/90 each) and analysed as a batch run analyses it (always with torch's scaler;
once with ``solutions/``, once without).  Each class is analysed again with two copies of its first member
added: an exact one, and one with all four disguises of tests/code_transforms.py (identifiers renamed, comments
rewritten, methods reordered, code reformatted).  One line per size and run: the classes, the range of thresholds
chosen, the classes that flag two independent students (or one against ``solutions/``) and the highest such score,
the lowest score of a copy with its original, and the classes that flag both copies.

    python benchmarks/similarity_small_classes.py [--sizes 5 7 9] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from autograder.batch import inputs, similarity  # noqa: E402
from code_transforms import disguise  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "independent"
CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")


def disguised_copy(source: Path, target: Path) -> Path:
    """A copy of ``source`` with every identifier renamed, comments rewritten, methods reordered and the code
    reformatted (tests/code_transforms.py's four disguises at once)."""
    target.mkdir(parents=True)
    for file in CONTRACT:
        if (source / file).is_file():
            (target / file).write_text(disguise((source / file).read_text()))
    return target


def measure(members: list[inputs.Submission], copies: list[inputs.Submission], solution: bool) -> dict:
    """One class's numbers: its threshold, the scores of independent pairs, with solutions/, and of each copy with
    the member it copies (``members[0]``)."""
    report = similarity.analyse(members + copies, solution=similarity.REFERENCE_SOLUTION if solution else None,
                                torch_scaler=similarity.torch_scaler_source())
    copied = {copy.name for copy in copies}
    independent, with_solution, copy_scores = [], [], {name: 0.0 for name in copied}
    for pair in report.pairs:
        keys = {pair.a.key, pair.b.key}
        if keys & copied:
            if members[0].name in keys:
                copy_scores[(keys & copied).pop()] = pair.score
        elif pair.b.key == similarity.SOLUTION_KEY:
            with_solution.append(pair.score)
        elif not pair.b.reference:
            independent.append(pair.score)
    return {"members": [member.name for member in members], "threshold": report.threshold,
            "independent": independent, "solution": with_solution, "copies": copy_scores,
            "independent_max": max(independent, default=0.0), "solution_max": max(with_solution, default=0.0),
            "flagged_independent": sum(score >= report.threshold for score in independent),
            "flagged_solution": sum(score >= report.threshold for score in with_solution)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 7, 9])
    parser.add_argument("--json", type=Path, help="write every class's numbers here")
    args = parser.parse_args()
    names = sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="small-classes-") as scratch:
        work = Path(scratch)
        for name in names:
            shutil.copytree(FIXTURES / name, work / "class" / name)
            shutil.copytree(FIXTURES / name, work / "copies" / f"{name}_exact")
            disguised_copy(FIXTURES / name, work / "copies" / f"{name}_disguised")
        found = {s.name: s for s in inputs.discover(sorted((work / "class").iterdir()), work / "in").submissions}
        copies = {s.name: s for s in inputs.discover(sorted((work / "copies").iterdir()), work / "in2").submissions}
        print(f"{len(names)} independent submissions: {', '.join(names)}\n")
        print("size | solutions/ | copies | classes | threshold | classes flagging independents | "
              "max independent | classes flagging vs solutions/ | max vs solutions/ | min copy | copies flagged")
        for size, solution, with_copies in itertools.product(args.sizes, (False, True), (False, True)):
            measured = []
            for members in itertools.combinations(names, size):
                added = [copies[f"{members[0]}_exact"], copies[f"{members[0]}_disguised"]] if with_copies else []
                measured.append(measure([found[name] for name in members], added, solution))
            rows += [{"size": size, "solution": solution, "with_copies": with_copies, **m} for m in measured]
            thresholds = [m["threshold"] for m in measured]
            copy_min = min((s for m in measured for s in m["copies"].values()), default=None)
            copies_flagged = sum(all(s >= m["threshold"] for s in m["copies"].values()) for m in measured)
            print(f"{size} | {'yes' if solution else 'no'} | {'yes' if with_copies else 'no'} | {len(measured)} | "
                  f"{min(thresholds):.2f}-{max(thresholds):.2f} | "
                  f"{sum(m['flagged_independent'] > 0 for m in measured)} | "
                  f"{max(m['independent_max'] for m in measured):.2f} | "
                  f"{sum(m['flagged_solution'] > 0 for m in measured) if solution else '-'} | "
                  f"{max(m['solution_max'] for m in measured):.2f} | "
                  f"{'-' if copy_min is None else f'{copy_min:.2f}'} | "
                  f"{f'{copies_flagged}/{len(measured)}' if with_copies else '-'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
