"""The README's points table, written from the rubric (``python -m autograder rubric --readme README.md``).

The table sums the rows of :mod:`autograder.engine.rubric` by part; it sits in README.md between two markers, so
moving points or adding a row is followed by one command, and ``tests/test_rubric_declared.py`` fails while the
README says otherwise.  English only: the README is.
"""

from __future__ import annotations

from pathlib import Path

from autograder.engine import rubric

BEGIN = "<!-- points table: python -m autograder rubric --readme README.md -->"
END = "<!-- end of points table -->"
PARTS = (("scaler", "Task 1 `ToyLossScaler`"), ("amp_step", "Task 2 `amp_step`"), ("quick_check", "Task 3 Quick Check"))


def _where(items: list[rubric.Item]) -> str:
    public = [item for item in items if item.suite == rubric.PUBLIC]
    hidden = len(items) - len(public)
    if not public:
        return f"{hidden} hidden (answer key only in the hidden suite)"
    return (f"{len(public)} public rows ({rubric.max_points(tuple(public)):g} pts) + {hidden} hidden rows, "
            "each with a public example")


def table() -> str:
    """The Markdown table, markers included."""
    lines = [BEGIN, "| part | points | where |", "|---|---|---|"]
    for task, name in PARTS:
        items = [item for item in rubric.ITEMS if item.task == task]
        lines.append(f"| {name} | {rubric.max_points(tuple(items)):g} | {_where(items)} |")
    lines += [f"| GPU part | {rubric.GPU_PART_POINTS:g} | graded by staff on a GPU; an informational row on Gradescope |",
              END]
    return "\n".join(lines)


def rewrite(text: str) -> str:
    """``text`` (a README) with the table between the markers replaced by :func:`table`."""
    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not (begin and end):
        raise ValueError(f"the README has no points table between {BEGIN!r} and {END!r}")
    return head + table() + tail


def write(path: Path) -> bool:
    """Rewrite the table in the README ``path``; whether it changed."""
    old = path.read_text(encoding="utf-8")
    new = rewrite(old)
    if new != old:
        path.write_text(new, encoding="utf-8")
    return new != old
