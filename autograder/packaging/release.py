"""Generate the student release (``assignment/*.py``) from the reference solution.

``solutions/`` is the single source.  Solution code is marked with otter-grader's
conventions:

* a block between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` becomes
  ``raise NotImplementedError("<Class.method> ...")`` at the block's indentation;
* a line ending in ``# SOLUTION`` keeps its left-hand side: ``Q1 = "B"  # SOLUTION``
  becomes ``Q1 = ...``.

Signatures, docstrings and comments outside the markers are kept.  Files without
markers are copied verbatim.  Run ``python -m autograder.packaging.release`` (``make student``).

It also builds the students' diagnosis table, ``checks/diagnosis.json`` (public checks only), which the public
checks and the notebook read to print a "Likely mistake" line, when what it is built from changed
(:func:`autograder.packaging.tables.refresh_table`); it is committed, and ``tests/test_release.py`` says when it
is stale.  ``--no-diagnosis`` skips it.  ``make student`` runs :mod:`autograder.packaging.student`, which does all
this and the notebooks and the grader's table.

And it records ``checks/amp_effects.json``, the grader's Task-2 verdicts in the public scenarios
(:mod:`autograder.packaging.amp_effects`): the public Task-2 checks judge from it, since students
get no reference ``amp_step``.  Committed too; ``tests/test_amp_effects.py`` says when it is stale.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path
from autograder import ROOT

TASKS = {"loss_scaler.py": 1, "amp_step.py": 2, "answers.py": 3}
#: What a stub raises: ``where`` the class and method (or "this part"), ``task`` its task's number.  The Korean
#: notebook's task cells raise :data:`autograder.packaging.notebook_ko.PROMPT`.
PROMPT = "{where} is not implemented yet: see Task {task} in README.md"
BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
LINE_MARKER = re.compile(r"^(?P<lhs>\s*[\w.\[\]\"']+\s*=\s*).*#\s*SOLUTION\s*$")


def _qualnames(source: str) -> dict[int, str]:
    """Map each line number to the qualified name of the innermost def/class around it."""
    names: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualname = f"{prefix}{child.name}"
                for line in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                    names[line] = qualname
                visit(child, qualname + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return names


def strip_solution(source: str, filename: str, prompt: str = PROMPT) -> str:
    """Return the student skeleton of one solution file, each stub raising ``prompt`` (:data:`PROMPT`)."""
    names = _qualnames(source)
    out: list[str] = []
    inside = False
    for number, line in enumerate(source.splitlines(), start=1):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError(f"{filename}:{number}: nested {BEGIN}")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            where = names.get(number, "this part")
            if filename not in TASKS:
                raise ValueError(f"{filename}:{number}: a solution block in a file no task owns (TASKS)")
            message = prompt.format(where=where, task=TASKS[filename])
            out.append(f'{indent}raise NotImplementedError("{message}")')
            continue
        if stripped == END:
            if not inside:
                raise ValueError(f"{filename}:{number}: {END} without {BEGIN}")
            inside = False
            continue
        if inside:
            continue
        match = LINE_MARKER.match(line)
        out.append(f"{match.group('lhs')}..." if match else line)
    if inside:
        raise ValueError(f"{filename}: {BEGIN} without {END}")
    return "\n".join(out) + "\n"


def release_files(solutions: Path) -> dict[str, str]:
    """File name -> student text for every ``*.py`` in ``solutions``."""
    return {path.name: strip_solution(path.read_text(encoding="utf-8"), path.name)
            for path in sorted(solutions.glob("*.py"))}


def write_release(solutions: Path, assignment: Path) -> list[str]:
    assignment.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in release_files(solutions).items():
        (assignment / name).write_text(text, encoding="utf-8")
        written.append(name)
    return written


#: Never part of what students get, wherever it lies in assignment/ (caches a local run leaves behind).
NOT_RELEASED = {"__pycache__", ".pytest_cache", ".ipynb_checkpoints", ".hypothesis", ".DS_Store"}


def handout_files(assignment: Path = ROOT / "assignment") -> list[tuple[Path, str]]:
    """(file, path relative to the folder) of everything students get: the committed ``assignment/`` folder
    (handouts, the three files to complete, the demo, the notebooks, the public checks), without caches.

    The platforms' packages (a PrairieLearn starter zip, a GitHub Classroom template) ship exactly these.
    """
    return [(path, path.relative_to(assignment).as_posix()) for path in sorted(assignment.rglob("*"))
            if path.is_file() and not NOT_RELEASED & set(path.relative_to(assignment).parts)
            and path.suffix not in (".pyc", ".pyo")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solutions", type=Path, default=ROOT / "solutions")
    parser.add_argument("--out", type=Path, default=ROOT / "assignment")
    parser.add_argument("--no-diagnosis", action="store_true", help="do not rebuild checks/diagnosis.json")
    args = parser.parse_args(argv)
    for name in write_release(args.solutions, args.out):
        print(f"wrote {args.out / name}")
    from autograder.packaging import amp_effects

    amp_effects.write(args.out / "checks" / "amp_effects.json")
    print(f"wrote {args.out / 'checks' / 'amp_effects.json'}")
    if not args.no_diagnosis:
        from autograder.packaging import tables

        outcome = tables.Outcome()
        tables.refresh_table(args.out / "checks" / "diagnosis.json", True, outcome)
        print("\n".join(outcome.rebuilt + outcome.left + outcome.failed))
        return 1 if outcome.failed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
