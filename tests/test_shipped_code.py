"""Nothing of the judge ships to students: no code they get passes a graded row copied into a submission.

What students get is the GitHub Classroom template (``python -m autograder.packaging.classroom``): the
handout folder ``assignment/`` (the files to complete, the demo, both notebooks, the public checks),
which the PrairieLearn question and the otter notebook ship too, plus the template's own row script.
Every function or class in it that has the shape of what a submission defines is copied, with the whole
file it sits in, into a submission of the skeleton and bound to the contract's name, and the batch is
graded with ``python -m autograder grade``: each earns what the skeleton earns, nothing.

A copy keeps the file's imports where the student process can make them, and drops those it cannot (the
grader's student processes cannot import ``checks``, say): each top-level import is tried.

The shapes: an ``amp_step`` is any function taking ``model``, ``optimizer`` and ``scaler``; when it is
nested in a top-level function (a factory, as a configurable reference amp_step is), that function is
called with nothing and with each module-level instance of a class the file defines (a configuration).
A ``ToyLossScaler`` is any class with ``scale``, ``unscale_``, ``step`` and ``update``.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path


from autograder.packaging import classroom
from conftest import ROOT, grade, load_results

SKELETON = {name: (ROOT / "assignment" / name).read_text() for name in ("loss_scaler.py", "amp_step.py", "answers.py")}
AMP_PARAMETERS = {"model", "optimizer", "scaler"}
SCALER_METHODS = {"scale", "unscale_", "step", "update"}


def _notebook_cells(text: str) -> list[str]:
    """A notebook's code cells as Python texts (an IPython magic line, such as %%writefile, becomes ``pass``)."""
    cells = [cell for cell in json.loads(text)["cells"] if cell["cell_type"] == "code"]
    return ["\n".join(line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!")) else line
                      for line in "".join(cell["source"]).splitlines()) for cell in cells]


def distribution(folder: Path) -> dict[str, str]:
    """Every Python text students get: the Classroom template's .py files and its notebooks' code cells."""
    template = classroom.build(folder)
    texts = {}
    for path in sorted(template.rglob("*")):
        relative = path.relative_to(template).as_posix()
        if path.suffix == ".py":
            texts[relative] = path.read_text(encoding="utf-8")
        elif path.suffix == ".ipynb":
            for number, cell in enumerate(_notebook_cells(path.read_text(encoding="utf-8"))):
                texts[f"{relative}[{number}]"] = cell
    return texts


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    arguments = function.args
    return {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}


def bindings(text: str) -> list[tuple[str, str]]:
    """(contract file, expression) for each way ``text`` offers to define what a submission defines."""
    tree = ast.parse(text)
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    configurations = [target.id for node in tree.body if isinstance(node, ast.Assign)
                      and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                      and node.value.func.id in classes for target in node.targets if isinstance(target, ast.Name)]
    found = []
    for top in tree.body:
        methods = {node.name for node in top.body if isinstance(node, ast.FunctionDef)} \
            if isinstance(top, ast.ClassDef) else set()
        if SCALER_METHODS <= methods:
            found.append(("loss_scaler.py", top.name))
        if not isinstance(top, ast.FunctionDef):
            continue
        if AMP_PARAMETERS <= _parameters(top):
            found.append(("amp_step.py", top.name))
        elif any(isinstance(node, (ast.FunctionDef, ast.Lambda)) and node is not top and AMP_PARAMETERS <= (
                _parameters(node) if isinstance(node, ast.FunctionDef) else {a.arg for a in node.args.args})
                for node in ast.walk(top)):
            found += [("amp_step.py", f"{top.name}({argument})") for argument in ["", *configurations]]
    return found


def copied(text: str) -> str:
    """``text`` with each top-level import tried: what fails to import in a student process is left out."""
    lines = text.splitlines()
    for node in reversed(ast.parse(text).body):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", None) != "__future__":
            start, end = node.lineno - 1, node.end_lineno or node.lineno
            tried = ["    " + line for line in lines[start:end]]
            lines[start:end] = ["try:", *tried, "except ImportError:", "    pass"]
    return "\n".join(lines) + "\n"


def copied_submissions(texts: dict[str, str]) -> dict[str, dict[str, str]]:
    """One submission per binding: the skeleton, with the contract file replaced by the whole copied file and
    the contract's name bound to what it offers (the same submission from two copies of a file counted once)."""
    name = {"amp_step.py": "amp_step", "loss_scaler.py": "ToyLossScaler"}
    found: dict[str, dict[str, str]] = {}
    for relative, text in texts.items():
        for contract, expression in bindings(text):
            files = {**SKELETON, contract: f"{copied(text)}\n\n{name[contract]} = {expression}\n"}
            digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:8]
            label = f"{relative}:{expression}".replace("/", "_").replace(".", "_")
            label = "".join(c if c.isalnum() or c == "_" else "-" for c in label)
            if not any(files == seen for seen in found.values()):
                found[f"{label}-{digest}"] = files
    return found


def test_the_shapes_are_found_in_a_reference_and_a_scaler() -> None:
    """The finder sees a configurable reference (a factory and its configuration) and a delegating scaler."""
    reference = ("import dataclasses\n@dataclasses.dataclass\nclass Config:\n    x: int = 1\nRIGHT = Config()\n"
                 "def make(config):\n    def amp_step(model, inputs, targets, loss_fn, optimizer, scaler):\n"
                 "        pass\n    return amp_step\n"
                 "class Wrapper:\n    def scale(self, x): pass\n    def unscale_(self, o): pass\n"
                 "    def step(self, o): pass\n    def update(self): pass\n")
    assert bindings(reference) == [("amp_step.py", "make()"), ("amp_step.py", "make(RIGHT)"),
                                   ("loss_scaler.py", "Wrapper")]


def test_no_code_students_get_earns_a_point_copied_into_a_submission(tmp_path: Path) -> None:
    texts = distribution(tmp_path / "template")
    assert "assignment/amp_step.py" not in texts and "amp_step.py" in texts and "checks/plugin.py" in texts
    cases = copied_submissions(texts)
    assert len(cases) >= 3  # the skeleton's own amp_step and ToyLossScaler at least
    folders = []
    for label, files in {"skeleton": SKELETON, **cases}.items():
        folder = tmp_path / "in" / label
        folder.mkdir(parents=True)
        for filename, text in files.items():
            (folder / filename).write_text(text, encoding="utf-8")
        folders.append(folder)
    done = grade(folders, tmp_path / "out", "--jobs", "2", "--no-similarity", timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {folder.name: load_results(tmp_path / "out", folder.name) for folder in folders}
    baseline = {test["name"]: test["score"] for test in results["skeleton"]["tests"]}
    earned = {label: {test["name"]: test["score"] for test in result["tests"]
                      if test["score"] > baseline.get(test["name"], 0.0)}
              for label, result in results.items()}
    assert {label: rows for label, rows in earned.items() if rows} == {}
