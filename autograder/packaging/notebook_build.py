"""Build the notebook edition, ``assignment/amp_homework.ipynb``, with ``otter assign``.

``python -m autograder.packaging.notebook_build`` (``make notebook``) generates an otter-assign
*master* notebook from the sources, so nothing drifts:

* the lesson and the task statements: sections of ``assignment/README.md`` (the handout);
* the task cells: ``solutions/*.py`` behind ``%%writefile <file>`` (running a cell writes the
  contract's file, so the notebook and ``.py`` submissions are graded by the same grader).
  Each ``# BEGIN SOLUTION`` block gets, as otter's prompt, the ``raise NotImplementedError``
  line of :mod:`autograder.packaging.release`, so a student's cells hold exactly ``assignment/*.py``;
* the test cells: one per rubric row (points, visibility), for :mod:`autograder.packaging.otter_build`'s tests;
* cells showing which dtypes autocast picks, the underflow demo with its loss plot
  (``underflow_demo.py``, which ``make student`` copies next to the notebook), the same
  demo with the student's scaler and ``amp_step``, and a GPU cell timing fp32 against
  AMP with the student's ``amp_step`` where CUDA exists.

``otter assign`` turns the master into the student notebook (solutions stripped, an otter
init cell, ``grader.check(...)`` cells, an export cell whose zip holds the three ``.py``
files).  The test code in the notebook's metadata is then replaced by otter_build's
public test files (``grader.check`` runs the public checks in ``checks/`` with pytest),
cell ids are made deterministic, and the result is written to ``assignment/``, with the
module those test files load next to it: ``amp_otter_bridge.py`` (a copy of the bridge's public edition,
``autograder/packaging/otter_public.py``, whose SHA-256 the test files check; nothing of the judge).

``--master PATH`` and ``--solution PATH`` also keep the master and otter's solution
notebook (not shipped; the tests execute the solution notebook).

The notebook's own cells are :mod:`autograder.packaging.notebook_en` (English) and
:mod:`autograder.packaging.notebook_ko` (Korean).
"""

from __future__ import annotations

import argparse
import copy
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from autograder.packaging import otter_build, release
from autograder.packaging.notebook_en import (ASSIGNMENT_CONFIG, CODE_TEXTS, DEMO_CODE, DEMO_MD, DTYPES_CODE,
                                             DTYPES_MD, GPU_CODE, GPU_MD, INTRO, LOAD_HELPER, MINE_CODE, MINE_MD)
from autograder import ROOT
from autograder.torch_install import TORCH_CPU_INDEX

HANDOUT = ROOT / "assignment" / "README.md"
NOTEBOOK = "amp_homework.ipynb"
#: Lesson sections of the handout's Part I shown in the notebook (by number).
LESSON = (1, 3, 4, 5, 6, 7)
TASK_FILES = {"scaler": "loss_scaler.py", "amp_step": "amp_step.py", "quick_check": "answers.py"}
TASK_HEADINGS = {"scaler": "Task 1", "amp_step": "Task 2", "quick_check": "Task 3"}

LANGUAGES = ("en", "ko")


def install_source(comment: str, pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The notebook's first code cell: pyproject.toml's pins of torch, pytest, hypothesis and otter-grader.

    Before otter's init cell, which imports otter: a hosted notebook (Colab, JupyterHub) has none of them.
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pytest depends on tomli there
        import tomli as tomllib  # type: ignore[no-redef]

    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    lines = project["dependencies"] + project["optional-dependencies"]["otter"]
    pins = {re.split(r"[\[=]", line, maxsplit=1)[0]: line.split(";")[0].replace("[grading]", "") for line in lines}
    rest = " ".join(pins[name] for name in ("pytest", "hypothesis", "otter-grader"))
    return (f"{comment}\nimport importlib.util\n\n"
            f'if not all(importlib.util.find_spec(name) for name in ("torch", "pytest", "hypothesis", "otter", "matplotlib")):\n'
            f"    %pip install --quiet {pins['torch']} --index-url {TORCH_CPU_INDEX}\n"
            f"    %pip install --quiet {rest} matplotlib")


def edition(language: str = "en") -> SimpleNamespace:
    """One edition's handout, notebook name and the notebook's own texts (English here, Korean in notebook_ko)."""
    if language == "en":
        return SimpleNamespace(
            handout=HANDOUT, notebook=NOTEBOOK, task_headings=TASK_HEADINGS, gpu_heading="GPU part",
            config=ASSIGNMENT_CONFIG, intro=INTRO, dtypes_md=DTYPES_MD, demo_md=DEMO_MD, mine_md=MINE_MD, gpu_md=GPU_MD,
            lesson_cell=("## Part I: the lesson\n\n(The full lesson, with why 16 bits is faster and the "
                         "old and new API names, is in `README.md`.)"),
            tasks_cell="## Part II: the tasks\n\nFill in the bodies that raise `NotImplementedError`; keep the signatures.",
            write_here="Write your code in the cell below and run it: it writes `{file}`.",
            quick_check_note="The Quick Check has no public check: the autograder's hidden tests grade `answers.py`.",
            code_texts=CODE_TEXTS, prompt=release.PROMPT, otters_words=lambda source: source)
    if language == "ko":
        from autograder.packaging import notebook_ko as ko

        english = ASSIGNMENT_CONFIG.split("  instructions: >-\n", 1)[0]
        return SimpleNamespace(
            handout=HANDOUT.with_name(ko.HANDOUT_NAME), notebook=ko.NOTEBOOK, task_headings=ko.TASK_HEADINGS,
            gpu_heading=ko.GPU_HEADING, config=f"{english}  instructions: >-\n    {ko.EXPORT_INSTRUCTIONS}\n",
            intro=ko.INTRO, dtypes_md=ko.DTYPES_MD, demo_md=ko.DEMO_MD, mine_md=ko.MINE_MD, gpu_md=ko.GPU_MD,
            lesson_cell=ko.LESSON_CELL, tasks_cell=ko.TASKS_CELL, write_here=ko.WRITE_HERE,
            quick_check_note=ko.QUICK_CHECK_NOTE, code_texts=ko.CODE_TEXTS, prompt=ko.PROMPT,
            otters_words=ko.otters_words)
    raise ValueError(f"no notebook edition in {language!r}: choose one of {', '.join(LANGUAGES)}")


def handout_sections(text: str) -> dict[str, str]:
    """``### `` sections of the handout by heading (without the ``### ``), up to the next heading."""
    sections: dict[str, str] = {}
    heading: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith(("## ", "### ", "---")):
            if heading is not None:
                sections[heading] = "\n".join(lines).strip()
            heading, lines = (line[4:].strip(), []) if line.startswith("### ") else (None, [])
            continue
        lines.append(line)
    if heading is not None:
        sections[heading] = "\n".join(lines).strip()
    return sections


def lesson_section(sections: dict[str, str], number: int) -> str:
    heading = next(h for h in sections if h.startswith(f"{number}. "))
    return f"### {heading}\n\n{sections[heading]}"


def task_section(sections: dict[str, str], task: str, texts: SimpleNamespace | None = None) -> str:
    texts = texts or edition()
    heading = next(h for h in sections if h.startswith(texts.task_headings[task] + ":"))
    return f"## {heading}\n\n{sections[heading]}\n\n" + texts.write_here.format(file=TASK_FILES[task])


def code_cell_source(template: str, texts: dict[str, str]) -> str:
    """One of the notebook's own code cells (:mod:`autograder.packaging.notebook_en`) in an edition: each ``«key»``
    filled from that edition's ``texts``."""
    for key, text in texts.items():
        template = template.replace(f"«{key}»", text)
    if "«" in template:
        missing = template[template.index("«"):][:60]
        raise ValueError(f"a code cell's text has no entry in the edition's CODE_TEXTS: {missing}")
    return template


def master_cell_source(source: str, filename: str, prompt: str = release.PROMPT) -> str:
    """A solution file as the body of a master-notebook cell: otter's markers, release's stubs raising ``prompt``."""
    student = release.strip_solution(source, filename, prompt).splitlines()
    raises = [line for line in student if "raise NotImplementedError(" in line]
    out: list[str] = [f"%%writefile {filename}"]
    blocks = 0
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == release.BEGIN:
            indent = line[: len(line) - len(line.lstrip())]
            out += [f'{indent}""" # BEGIN PROMPT', raises[blocks], f'{indent}""" # END PROMPT',
                    f"{indent}# BEGIN SOLUTION NO PROMPT"]
            blocks += 1
            continue
        out.append(line)
    if blocks != len(raises):
        raise ValueError(f"{filename}: {blocks} solution blocks but {len(raises)} prompts")
    return "\n".join(out)


def test_cell_source(row: otter_build.Row) -> str:
    """A master-notebook test cell for one rubric row: its points and visibility for otter assign.

    otter assign needs a test cell per case to write the question's tests and check cell; the
    test code it writes is then replaced by otter_build's test file (see :func:`finish`).
    """
    return (f'""" # BEGIN TEST CONFIG\npoints: {otter_build._num(row.item.points)}\n'
            f'hidden: {"true" if row.hidden else "false"}\n""" # END TEST CONFIG\n'
            f"def {row.function}():\n"
            f"    pass  # rubric row {row.item.number}: replaced by autograder/packaging/otter_build.py's test file")


def master_notebook(rows: list[otter_build.Row], language: str = "en") -> Any:
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell

    texts = edition(language)

    def code(template: str) -> str:
        return code_cell_source(template, texts.code_texts)

    text = texts.handout.read_text(encoding="utf-8")
    sections = handout_sections(text)
    title, _, rest = text.partition("\n")
    first_paragraph = rest.strip().split("\n\n")[0]
    cells = [new_raw_cell(texts.config),
             new_markdown_cell(f"{title}\n\n{first_paragraph}\n\n{texts.intro}"),
             new_markdown_cell(texts.lesson_cell)]
    for number in LESSON:
        cells.append(new_markdown_cell(lesson_section(sections, number)))
        if number == 4:
            cells += [new_markdown_cell(texts.dtypes_md), new_code_cell(code(DTYPES_CODE))]
    cells += [new_markdown_cell(texts.demo_md), new_code_cell(code(DEMO_CODE)),
              new_markdown_cell(texts.tasks_cell),
              new_code_cell(code(LOAD_HELPER))]
    for task, filename in TASK_FILES.items():
        question, _ = otter_build.QUESTIONS[task]
        mine = [r for r in rows if r.item.task == task]
        source = (ROOT / "solutions" / filename).read_text(encoding="utf-8")
        cells += [new_markdown_cell(task_section(sections, task, texts)),
                  new_raw_cell(f"# BEGIN QUESTION\nname: {question}\n"
                               f"points: {otter_build._num(sum(r.item.points for r in mine))}"),
                  new_raw_cell("# BEGIN SOLUTION"),
                  new_code_cell(master_cell_source(source, filename, texts.prompt)),
                  new_raw_cell("# END SOLUTION"),
                  new_raw_cell("# BEGIN TESTS")]
        cells += [new_code_cell(test_cell_source(row)) for row in mine]
        cells += [new_raw_cell("# END TESTS"), new_raw_cell("# END QUESTION")]
        if task == "quick_check":
            cells.append(new_markdown_cell(texts.quick_check_note))
        if task == "amp_step":
            cells += [new_markdown_cell(texts.mine_md), new_code_cell(code(MINE_CODE))]
    gpu = next(h for h in sections if h.startswith(texts.gpu_heading))
    cells += [new_markdown_cell(f"## {gpu}\n\n{sections[gpu]}"), new_markdown_cell(texts.gpu_md),
              new_code_cell(code(GPU_CODE))]
    return new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"}})


def finish(nb: Any, rows: list[otter_build.Row], language: str = "en") -> Any:
    """Our public test files in the metadata, the install cell before otter's init cell, deterministic cell ids,
    no outputs; what otter itself wrote, in the edition's language
    (:data:`autograder.packaging.notebook_ko.OTTER_WORDS`)."""
    from nbformat.v4 import new_code_cell

    nb = copy.deepcopy(nb)
    tests = nb["metadata"]["otter"]["tests"]
    expected = {otter_build.QUESTIONS[task][0]: task for task in TASK_FILES}
    if set(tests) != set(expected):
        raise RuntimeError(f"otter assign wrote tests for {sorted(tests)}, expected {sorted(expected)}")
    for question, task in expected.items():
        tests[question] = otter_build.render_test_file(task, rows, public_only=True, language=language)
    nb["cells"] = [cell for cell in nb["cells"] if cell["source"].strip()]  # otter's empty last cell
    init = next(cell for cell in nb["cells"] if "import otter" in cell["source"])
    cells = [cell for cell in nb["cells"] if cell is not init]
    texts = edition(language)
    nb["cells"] = cells[:1] + [new_code_cell(install_source(texts.code_texts["install.comment"])), init] + cells[1:]
    for index, cell in enumerate(nb["cells"]):
        cell["id"] = f"cell-{index:03d}"
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cell["source"] = texts.otters_words(cell["source"])  # otter's cells: no other cell holds its words
    return nb


def build(out: Path, *, master_out: Path | None = None, solution_out: Path | None = None,
          language: str = "en") -> Path:
    import nbformat

    otter_build.check_otter_version()
    rows = otter_build.rubric_rows()
    master = master_notebook(rows, language)
    notebook_name = edition(language).notebook  # otter's init cell opens the notebook by this name
    with tempfile.TemporaryDirectory(prefix="amp-notebook-") as tmp:
        stage = Path(tmp)
        for name in TASK_FILES.values():  # otter assign checks that export files exist
            (stage / name).write_text("", encoding="utf-8")
        nbformat.write(master, stage / notebook_name)
        done = subprocess.run([sys.executable, "-m", "otter", "assign", "--no-pdfs", "--no-run-tests",
                               notebook_name, "dist"], cwd=stage, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"otter assign failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        student = finish(nbformat.read(stage / "dist" / "student" / notebook_name, as_version=4), rows, language)
        solution = finish(nbformat.read(stage / "dist" / "autograder" / notebook_name, as_version=4), rows, language)
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(student, out)
    otter_build.write_bridge(out.parent, public=True)  # what its test files load: part of the student's folder
    if master_out:
        master_out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(master, master_out)
    if solution_out:
        solution_out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(solution, solution_out)
    return out


def task_cells(nb: Any) -> dict[str, str]:
    """File name -> source of the notebook's ``%%writefile`` cell for it."""
    found = {}
    for cell in nb["cells"]:
        match = re.match(r"%%writefile (\S+)\n", cell["source"]) if cell["cell_type"] == "code" else None
        if match:
            found[match.group(1)] = cell["source"][match.end():]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--language", choices=LANGUAGES, default="en",
                        help="the edition: en (README.md -> amp_homework.ipynb) or ko (README.ko.md -> amp_homework.ko.ipynb)")
    parser.add_argument("--out", type=Path, help="default: assignment/ and the edition's notebook name")
    parser.add_argument("--master", type=Path, help="also write the generated master notebook here")
    parser.add_argument("--solution", type=Path, help="also write otter's solution notebook here")
    args = parser.parse_args(argv)
    out = args.out or ROOT / "assignment" / edition(args.language).notebook
    path = build(out, master_out=args.master, solution_out=args.solution, language=args.language)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
