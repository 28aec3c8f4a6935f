"""Exit 1 unless two grading runs gave every submission the same grade, row by row.

    python .ci/same_grades.py OUT_A OUT_B

OUT_A and OUT_B are ``python -m autograder grade --out`` folders (one ``NAME/results.json`` per
submission), e.g. the catalogue graded under two Pythons. Compared: the total, and each row's number,
score, max_score and status. Printed: one line per difference, then a summary line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def grades(out: Path) -> dict[str, tuple]:
    """Per submission folder: (total, ((number, score, max_score, status), ...))."""
    found = {}
    for path in sorted(out.glob("*/results.json")):
        results = json.loads(path.read_text(encoding="utf-8"))
        rows = tuple((t.get("number"), t.get("score"), t.get("max_score"), t.get("status")) for t in results["tests"])
        found[path.parent.name] = (results.get("score"), rows)
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    first, second = (grades(Path(arg)) for arg in argv)
    if not first:
        print(f"no */results.json in {argv[0]}", file=sys.stderr)
        return 2
    differences = []
    for name in sorted(first.keys() | second.keys()):
        a, b = first.get(name), second.get(name)
        if a is None or b is None:
            differences.append(f"{name}: graded in only one of the two runs")
        elif a != b:
            rows = [f"{ra} vs {rb}" for ra, rb in zip(a[1], b[1]) if ra != rb] or ["rows differ in number"]
            differences.append(f"{name}: total {a[0]} vs {b[0]}; " + "; ".join(rows))
    for line in differences:
        print(line)
    print(f"{len(first)} submissions compared: {len(differences)} graded differently ({argv[0]} vs {argv[1]})")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
