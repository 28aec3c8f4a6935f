"""Build ``dist/otter-autograder.zip``: this assignment's grader, packaged for otter-grader.

``python -m autograder.otter_build`` (``make otter``) generates one otter question per
graded task of :mod:`autograder.rubric` (``q_scaler``, ``q_amp_step``, ``q_quick_check``)
in otter's exception-based test format: one test case per rubric row, with the row's
points and visibility (public row -> public case, hidden row -> hidden case); a
parametrized row is split into its pytest cases, which share its points as the
judge's partial credit does.  The cases do not test anything inside otter's kernel:
they ask the isolated judge (see :mod:`autograder.otter_bridge`), so isolation,
counterexamples and determinism are the same as with ``python -m autograder grade``.

The zip is made by ``otter generate`` with:

* ``tests/q_*.py``: the generated test files;
* ``files/amp_grader.zip``: the grader (``autograder/`` with the hidden tests, and
  ``assignment/checks/``), extracted to a temporary folder when grading;
* ``files/amp_homework.ipynb``: a stand-in notebook.  Otter grades one notebook, or one
  ``.py`` file, per submission; this assignment's submissions are three ``.py``
  files.  Otter copies ``files/`` into the submission folder, so the stand-in is
  always the one notebook there (it replaces a submitted ``amp_homework.ipynb``)
  and otter executes it, not the student's code; its tests then grade the ``.py``
  files (which the notebook edition's ``%%writefile`` cells produce);
* ``requirements.txt``: CPU torch and the grader's pinned dependencies (from
  ``pyproject.toml``), on top of otter's own;
* ``otter_config.json``: hidden rows shown after publication unless
  ``AMP_HIDDEN_VISIBILITY=hidden``.

``--tests-only DIR`` writes just the test files (``--public-only`` drops the hidden
cases, as in a student's copy).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import keyword
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from autograder import rubric

ROOT = Path(__file__).resolve().parent.parent
BRIDGE = Path(__file__).resolve().parent / "otter_bridge.py"
BRIDGE_MARKER = "# ---- otter bridge:"
OTTER_VERSION = "7.0.0"
PYTHON_VERSION = "3.11"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: The judge's runtime dependencies (pins taken from pyproject.toml).
RUNTIME_PACKAGES = ("torch", "pytest", "hypothesis", "rich")
DRIVER_NAME = "amp_homework.ipynb"
GRADER_ZIP_NAME = "amp_grader.zip"
#: Build tools, not needed to grade.
NOT_IN_GRADER = {"otter_build.py", "otter_bridge.py", "otter_plugin.py", "notebook_build.py", "gradescope.py"}
PLUGIN = "autograder.otter_plugin.AmpQuarantine"
ZIP_DATE = (2024, 1, 1, 0, 0, 0)

TITLES = {
    "scaler": "Task 1: the ToyLossScaler (loss_scaler.py)",
    "amp_step": "Task 2: amp_step (amp_step.py)",
    "quick_check": "Task 3: Quick Check (answers.py)",
}
#: task -> (otter question name, title): one question per task of the rubric's graded rows, in rubric order.
QUESTIONS = {task: (f"q_{task}", TITLES.get(task, f"Task {task}"))
             for task in dict.fromkeys(item.task for item in rubric.ITEMS)}


@dataclass(frozen=True)
class Case:
    """One otter test case: one pytest case of one rubric row."""

    item: rubric.Item
    param: str  # pytest parameter id, "" if the row is not parametrized
    index: int
    params: tuple[str, ...]
    public_node: str  # "checks/test_public_x.py::test_name" for a public row, else ""

    @property
    def name(self) -> str:
        suffix = f" [{self.param}]" if self.param else ""
        return f"{self.item.number} {self.item.title}{suffix}"

    @property
    def points(self) -> float:
        return self.item.points / len(self.params)

    @property
    def function(self) -> str:
        slug = re.sub(r"\W+", "_", f"{self.item.number}_{self.param}".replace(".", "_")).strip("_")
        name = f"test_{slug}"
        return name + "_" if keyword.iskeyword(name) else name


class _Collector:
    def __init__(self) -> None:
        self.found: list[tuple[str, str, str]] = []

    def pytest_collection_modifyitems(self, items: list) -> None:  # type: ignore[type-arg]
        self.found = [(getattr(i, "originalname", i.name), i.name, str(i.path)) for i in items]


def collect_cases() -> list[Case]:
    """Every rubric row's pytest cases, collected from the public and hidden suites."""
    import pytest

    from autograder import judge

    collector = _Collector()
    for folder in (str(judge.PUBLIC_DIR.parent), str(judge.ROOT)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    args = [str(judge.PUBLIC_DIR), str(judge.HIDDEN_DIR), "-c", str(judge.INI), "--rootdir", str(judge.ROOT),
            "-p", "checks.plugin", "-p", "no:cacheprovider", "--collect-only", "-q", "--no-header",
            "--continue-on-collection-errors"]
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        pytest.main(args, plugins=[collector])
    cases: list[Case] = []
    for item in rubric.ITEMS:
        found = [(name, path) for test, name, path in collector.found if test == item.test]
        if not found:
            raise RuntimeError(f"rubric row {item.number} ({item.test}) matches no collected test:\n"
                               f"{buffer.getvalue()[-4000:]}")
        params = tuple(name.split("[", 1)[1][:-1] if "[" in name else "" for name, _ in found)
        node = ""
        if item.suite == rubric.PUBLIC:
            relative = Path(found[0][1]).resolve().relative_to(judge.PUBLIC_DIR.parent)
            node = f"{relative.as_posix()}::{item.test}"
        cases += [Case(item, param, index, params, node) for index, param in enumerate(params)]
    return cases


def bridge_source() -> str:
    text = BRIDGE.read_text(encoding="utf-8")
    start = text.index(BRIDGE_MARKER)
    return text[text.index("\n", start) + 1:]


def _num(value: float) -> str:
    return f"{value:g}" if float(value).is_integer() else repr(float(value))


def _py(value: object) -> str:
    """A Python literal (JSON strings are valid Python strings)."""
    return json.dumps(value, ensure_ascii=False)


def render_test_file(task: str, cases: list[Case], *, public_only: bool = False) -> str:
    """The otter exception-based test file of one task."""
    question, title = QUESTIONS[task]
    chosen = [c for c in cases if c.item.task == task and not (public_only and c.item.suite != rubric.PUBLIC)]
    points = sum(c.points for c in chosen)
    node_ids = {c.item.number: [c.public_node] for c in chosen if c.public_node}
    lines = [
        f'"""{title}: otter test file, {points:g} points.',
        "",
        "Generated by autograder/otter_build.py from autograder/rubric.py: do not edit.  One case per",
        "rubric row (a parametrized row: per pytest case).  In otter's grading run the cases read the",
        "verdicts of the isolated judge (python -m autograder grade); in a student's notebook they run",
        'the public checks in checks/ with pytest.  See autograder/otter_bridge.py.',
        '"""',
        "",
        "from otter.test_files import test_case",
        "",
        "OK_FORMAT = False",
        "",
        f"name = {_py(question)}",
        f"points = {_num(points)}",
        "",
        bridge_source().rstrip(),
        "",
        "",
        f"AMP_NODE_IDS = {_py(node_ids)}",
        "",
    ]
    for case in chosen:
        hidden = case.item.suite != rubric.PUBLIC
        lines += [
            "",
            f"@test_case(name={_py(case.name)}, points={_num(case.points)}, hidden={hidden})",
            f"def {case.function}():",
            f"    amp_verdict({_py(case.item.number)}, {tuple(case.params)!r}, {case.index}, AMP_NODE_IDS)",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def write_tests(out: Path, cases: list[Case], *, public_only: bool = False) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for task, (question, _) in QUESTIONS.items():
        path = out / f"{question}.py"
        path.write_text(render_test_file(task, cases, public_only=public_only), encoding="utf-8")
        written.append(path)
    return written


def _add(bundle: zipfile.ZipFile, arcname: str, data: bytes) -> None:
    info = zipfile.ZipInfo(arcname, ZIP_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    bundle.writestr(info, data)


def grader_zip(path: Path) -> None:
    """The grader as the judge needs it: ``autograder/`` (hidden tests included) and ``assignment/checks/``."""
    files = sorted(p for p in (ROOT / "autograder").rglob("*") if p.is_file())
    files += sorted(p for p in (ROOT / "assignment" / "checks").rglob("*") if p.is_file())
    with zipfile.ZipFile(path, "w") as bundle:
        for file in files:
            if "__pycache__" in file.parts or file.suffix == ".pyc" or file.name in NOT_IN_GRADER:
                continue
            _add(bundle, file.relative_to(ROOT).as_posix(), file.read_bytes())


def driver_notebook() -> str:
    """The stand-in notebook otter executes instead of any submitted code."""
    import nbformat

    cell = nbformat.v4.new_markdown_cell(
        "# Stand-in notebook of the otter autograder\n\n"
        "Otter executes this notebook instead of any submitted notebook: grading runs the assignment's "
        "isolated judge on the submitted `.py` files (`loss_scaler.py`, `amp_step.py`, `answers.py`), "
        "which the notebook edition's `%%writefile` cells produce. No submitted code runs in otter's kernel.")
    cell["id"] = "amp-otter-driver"
    nb = nbformat.v4.new_notebook(cells=[cell], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"}})
    return nbformat.writes(nb) + "\n"


def requirements() -> str:
    """CPU torch and the judge's other dependencies, pinned as in pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
        deps = tomllib.loads(text)["project"]["dependencies"]
    except ImportError:  # Python 3.10: the pins are plain "name==version" strings
        deps = re.findall(r'"([A-Za-z0-9_.-]+==[^"]+)"', text)
    pins = {re.split(r"[=<>!~ \[]", d, maxsplit=1)[0].lower(): d for d in deps}
    lines = ["# The judge's runtime dependencies (pins from pyproject.toml); torch as the CPU build.",
             f"--extra-index-url {TORCH_CPU_INDEX}"]
    for name in RUNTIME_PACKAGES:
        pin = pins[name]
        lines.append(pin + "+cpu" if name == "torch" else pin)
    return "\n".join(lines) + "\n"


def otter_config() -> dict[str, object]:
    return {
        "lang": "python",
        "show_hidden": rubric.HIDDEN_VISIBILITY != "hidden",
        "show_stdout": False,
        "pdf": False,
        "print_summary": True,
        "plugins": [PLUGIN],
    }


def otter_env() -> dict[str, str]:
    """The environment for running otter here: it imports the plugin (``autograder.otter_plugin``) by name."""
    import os

    paths = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def check_otter_version() -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("otter-grader")
    except PackageNotFoundError:
        raise SystemExit('otter-grader is not installed: pip install -e ".[otter]" (or make otter)') from None
    if found != OTTER_VERSION:
        raise SystemExit(f"otter-grader {found} is installed; this build is pinned to {OTTER_VERSION}")


def build(out: Path) -> Path:
    """Write the otter autograder zip to ``out`` with ``otter generate``."""
    check_otter_version()
    cases = collect_cases()
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="amp-otter-build-") as tmp:
        stage = Path(tmp)
        write_tests(stage / "tests", cases)
        grader_zip(stage / GRADER_ZIP_NAME)
        (stage / DRIVER_NAME).write_text(driver_notebook(), encoding="utf-8")
        (stage / "requirements.txt").write_text(requirements(), encoding="utf-8")
        (stage / "otter_config.json").write_text(json.dumps(otter_config(), indent=2) + "\n", encoding="utf-8")
        command = [sys.executable, "-m", "otter", "generate", "--tests-dir", "tests", "--output-path", str(out),
                   "--config", "otter_config.json", "--requirements", "requirements.txt", "--no-environment",
                   "--python-version", PYTHON_VERSION, GRADER_ZIP_NAME, DRIVER_NAME]
        subprocess.run(command, cwd=stage, check=True, env=otter_env())
    with zipfile.ZipFile(out, "a") as bundle:  # the plugin, importable by run_otter.py from the zip's root
        _add(bundle, "autograder/__init__.py", b'"""The otter plugin of the AMP homework\'s autograder."""\n')
        _add(bundle, "autograder/otter_plugin.py", (ROOT / "autograder" / "otter_plugin.py").read_bytes())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "otter-autograder.zip")
    parser.add_argument("--tests-only", type=Path, metavar="DIR", help="only write the otter test files to DIR")
    parser.add_argument("--public-only", action="store_true", help="with --tests-only: leave out hidden cases")
    args = parser.parse_args(argv)
    if args.tests_only:
        for path in write_tests(args.tests_only, collect_cases(), public_only=args.public_only):
            print(f"wrote {path}")
        return 0
    path = build(args.out)
    with zipfile.ZipFile(path) as bundle:
        names = bundle.namelist()
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB): " + ", ".join(sorted(names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
