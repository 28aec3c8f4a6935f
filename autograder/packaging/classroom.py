"""GitHub Classroom packaging: a template repository whose workflow shows students their public rows on every push.

``python -m autograder.packaging.classroom --out dist/classroom`` (``make classroom``) writes what students get
(``assignment/``: the handout, the three files, the demo, the public checks), ``requirements.txt`` (torch and
the checks' packages, pinned as in ``pyproject.toml``), ``.github/classroom/row.py``
(:mod:`autograder.packaging.classroom_row`) and ``.github/workflows/classroom.yml``:

* the public checks run **once** per push (``python -m pytest --junitxml ...``);
* one ``classroom-resources/autograding-command-grader`` step per public rubric row, with the row's points as
  ``max-score``, reads that run's results (``row.py``): the row passes when every case of its test passed;
* but a row whose cases share its points (a parametrized test: the grader gives a case that fails its share
  only) gets a step of its own instead, ``row.py ... --shares POINTS``, which writes the command grader's
  result format with one entry per case (the command grader gives all or nothing);
* ``classroom-resources/autograding-grading-reporter`` totals them for the student and for GitHub Classroom.

The row steps and the reporter run ``if: always()``: a run of the checks that is cut short (its time limit)
still reports every row, at 0 where there is no result.

Nothing of the hidden suite is in the template: final grades come from the TA batch over the cloned
repositories (``python -m autograder grade REPOS --roster classroom_roster.csv``).  A row counts here what it
counts in the batch: all or nothing for a single test, each passed case's share for a parametrized one.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

from autograder import ROOT
from autograder.engine import rubric, strings
from autograder.engine.files import write_tree
from autograder.packaging import built, gradescope, release

WORKFLOW = ".github/workflows/classroom.yml"
ROW_SCRIPT = ".github/classroom/row.py"
#: What the public checks' run needs (the handout's ``pip install``), pinned as everywhere else.
CHECKS_PACKAGES = ("torch", "pytest", "hypothesis")
PYTHON_VERSION = "3.12"
COMMAND_GRADER = "classroom-resources/autograding-command-grader@v1"
REPORTER = "classroom-resources/autograding-grading-reporter@v1"
RESULTS_XML = "${{ runner.temp }}/public-checks.xml"
#: Minutes a row's step may take (it only reads the XML) and the public checks' run.
ROW_TIMEOUT_MINUTES = 1
CHECKS_TIMEOUT_MINUTES = 30


def public_rows() -> list[rubric.Item]:
    """The rubric rows students see at once: the workflow's rows, in rubric order."""
    return [item for item in rubric.ITEMS if item.suite == rubric.PUBLIC]


def shared_rows() -> set[str]:
    """The public rows whose test is parametrized in ``assignment/checks`` (read from the source, not imported): its
    cases share the row's points."""
    shared = set()
    tests = {item.test: item.number for item in public_rows()}
    for path in sorted((ROOT / "assignment" / "checks").glob("test_public_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in tests and any(
                    "parametrize" in ast.unparse(decorator) for decorator in node.decorator_list):
                shared.add(tests[node.name])
    return shared


def step_id(item: rubric.Item) -> str:
    return "row-" + item.number.replace(".", "-")


def _max_score(item: rubric.Item) -> int:
    """The row's points as the command grader reads them (``parseInt``): whole points only."""
    if item.points != int(item.points):
        raise ValueError(f"row {item.number} has {item.points} points: GitHub's command grader takes whole points")
    return int(item.points)


def _q(text: str) -> str:
    """A YAML scalar for any text: a JSON string is a valid double-quoted YAML scalar."""
    return json.dumps(text, ensure_ascii=False)


def row_name(item: rubric.Item, language: str = strings.DEFAULT) -> str:
    """The row's name in the workflow (students see it in the run): its number and title in ``language``."""
    return f"{item.number} {strings.title(item, strings.check_language(language))}"


def workflow(language: str = strings.DEFAULT) -> str:
    """The text of .github/workflows/classroom.yml, its row names in ``language``."""
    rows = public_rows()
    lines = [
        "# GitHub Classroom autograding (written by `make classroom` from the grader's rubric; rebuild, do not edit).",
        "# The public checks run once per push; each row step then reports one public row with its points.",
        "# Hidden tests are not here: the course staff grade them from the cloned repositories after the due date.",
        "name: Autograding Tests",
        "'on':",
        "  - push",
        "  - repository_dispatch",
        "permissions:",
        "  checks: write",
        "  actions: read",
        "  contents: read",
        "jobs:",
        "  run-autograding-tests:",
        "    runs-on: ubuntu-latest",
        "    if: github.actor != 'github-classroom[bot]'",
        "    steps:",
        "      - name: Checkout code",
        "        uses: actions/checkout@v4",
        "      - name: Set up Python",
        "        uses: actions/setup-python@v5",
        "        with:",
        f"          python-version: {_q(PYTHON_VERSION)}",
        "      - name: Install torch (CPU) and the checks' packages",
        "        run: |",
        f"          python -m pip install --disable-pip-version-check --index-url {gradescope.TORCH_CPU_INDEX} "
        "\"$(grep -m1 '^torch==' requirements.txt)\"",
        "          python -m pip install --disable-pip-version-check -r requirements.txt",
        "      - name: Run the public checks (once; the row steps read their results)",
        f"        timeout-minutes: {CHECKS_TIMEOUT_MINUTES}",
        "        run: |",
        f"          rm -f \"{RESULTS_XML}\"",
        f"          python -m pytest --junitxml=\"{RESULTS_XML}\" || true",
    ]
    shared = shared_rows()
    for item in rows:
        name = row_name(item, language)
        command = f'python {ROW_SCRIPT} "{RESULTS_XML}" {item.test}'
        lines += [
            f"      - name: {_q(name)}",
            f"        id: {step_id(item)}",
            "        if: always()",
        ]
        if item.number in shared:  # each case its share: the step writes the command grader's result itself
            lines += [f"        timeout-minutes: {ROW_TIMEOUT_MINUTES}",
                      f"        run: {_q(f'{command} --shares {_max_score(item)}')}"]
            continue
        lines += [
            f"        uses: {COMMAND_GRADER}",
            "        with:",
            f"          test-name: {_q(name)}",
            f"          command: {_q(command)}",
            f"          timeout: {ROW_TIMEOUT_MINUTES}",
            f"          max-score: {_max_score(item)}",
        ]
    lines += [
        "      - name: Autograding Reporter",
        "        if: always()",
        f"        uses: {REPORTER}",
        "        env:",
        *[f"          {step_id(item).upper()}_RESULTS: \"${{{{steps.{step_id(item)}.outputs.result}}}}\"" for item in rows],
        "        with:",
        f"          runners: {','.join(step_id(item) for item in rows)}",
    ]
    return "\n".join(lines) + "\n"


GITIGNORE = "__pycache__/\n.pytest_cache/\n.hypothesis/\n*.pyc\n"


def build(out: Path, language: str = strings.DEFAULT) -> Path:
    """Write the template repository to ``out`` (replaced whole), its row names in ``language``; return it."""
    strings.check_language(language)
    files: list[tuple[str, bytes | str]] = [(relative, path.read_bytes()) for path, relative in release.handout_files()]
    files += [
        ("requirements.txt", "\n".join(gradescope.image_requirements(packages=CHECKS_PACKAGES)) + "\n"),
        (ROW_SCRIPT, Path(__file__).with_name("classroom_row.py").read_text(encoding="utf-8")),
        (WORKFLOW, workflow(language)),
        (".gitignore", GITIGNORE),
    ]
    return write_tree(out, [(relative, data, 0o644) for relative, data in files])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.packaging.classroom", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "classroom")
    parser.add_argument("--language", choices=strings.LANGUAGES, default=strings.DEFAULT,
                        help="language of the rows' names (default: en)")
    args = parser.parse_args(argv)
    out = build(args.out, args.language)
    built.record(args.out, built.rebuild_command(args.out, "classroom", "autograder.packaging.classroom", list(argv or sys.argv[1:]),
                                                 AMP_LANGUAGE="" if args.language == strings.DEFAULT else args.language))
    points = sum(_max_score(item) for item in public_rows())
    print(f"wrote {out}: {len(public_rows())} public rows, {points} points on every push")
    return 0


if __name__ == "__main__":
    sys.exit(main())
