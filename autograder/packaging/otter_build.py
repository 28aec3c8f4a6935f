"""Build ``dist/otter-autograder.zip``: this assignment's grader, packaged for otter-grader.

``python -m autograder.packaging.otter_build`` (``make otter``) generates one otter question per
graded task of :mod:`autograder.engine.rubric` (``q_scaler``, ``q_amp_step``, ``q_quick_check``)
in otter's exception-based test format: one test case per rubric row, with the row's
points and visibility (a visible row is a public case, a hidden one a hidden case).  The
cases test nothing inside otter's kernel: they take the verdicts of the isolated judge
(:mod:`autograder.packaging.otter_bridge`), so isolation, messages with counterexamples and
determinism are those of ``python -m autograder grade``, and so is partial credit (a row
partly passed becomes two cases, its passed and its failed part, with the judge's score).

The zip is made by ``otter generate`` with:

* ``tests/q_*.py``: the generated test files, each a small loader of the bridge (its rows,
  and the SHA-256 of the bridge it was built with);
* ``files/amp_otter_bridge.py``: the bridge's staff edition (``autograder/packaging/otter_bridge.py``, byte
  for byte; students get the public edition, ``otter_public.py``), which the test files load from the folder
  otter grades in after checking its digest.  Otter copies ``files/`` into that folder after the submission, over any
  submitted file of the same name, and the plugin keeps it there;
* ``files/amp_grader.zip``: the grader (``autograder/`` with the hidden tests, and
  ``checks/``, side by side), extracted to a temporary folder when grading;
* ``files/amp_homework.ipynb``: a stand-in notebook (otter grades one notebook per submission; ours are three
  ``.py`` files, which the notebook edition's ``%%writefile`` cells produce).  Copied over any submitted one, it is
  the notebook otter executes, never submitted code; its tests then grade the ``.py`` files;
* ``requirements.txt``: CPU torch and the grader's pinned dependencies (from
  ``pyproject.toml``), on top of otter's own; Python 3.11;
* ``otter_config.json``: hidden rows shown after publication unless
  ``AMP_HIDDEN_VISIBILITY=hidden``, and the plugin below;

and, added at the zip's root, ``autograder/packaging/otter_plugin.py`` (:mod:`autograder.packaging.otter_plugin`),
which moves the submitted files out of otter's kernel's way before grading.

``--tests-only DIR`` writes just the test files, and the bridge they load (which belongs in
the folder otter grades in, the parent of their ``tests/``), to DIR (``--public-only`` drops
the hidden rows, as in a student's copy).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import keyword
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from checks import words

from autograder import PACKAGE, ROOT, locations, settings
from autograder.engine import judge_words, rubric, strings
from autograder.packaging import built, otter_bridge
from autograder.torch_install import TORCH_CPU_INDEX

#: The bridge's two editions: the staff's (the judge's verdicts, in the otter zip's files/) and the public one (the
#: public checks, next to the student's notebook), each loaded by the test files built with it.
BRIDGES = {False: Path(__file__).resolve().parent / "otter_bridge.py",
           True: Path(__file__).resolve().parent / "otter_public.py"}
#: The bridge's name where it ships, either edition (a name no student picks).
BRIDGE_NAME = otter_bridge.SHIPPED_NAME
OTTER_VERSION = "7.0.0"
PYTHON_VERSION = "3.11"
#: The judge's runtime dependencies (pins taken from pyproject.toml).
RUNTIME_PACKAGES = ("torch", "pytest", "hypothesis", "rich")
DRIVER_NAME = "amp_homework.ipynb"
GRADER_ZIP_NAME = "amp_grader.zip"
#: Build tools, not needed to grade.
NOT_IN_GRADER = {"otter_build.py", "otter_bridge.py", "otter_public.py", "otter_plugin.py", "notebook_build.py",
                 "gradescope.py"}
PLUGIN = "autograder.packaging.otter_plugin.AmpQuarantine"
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
class Row:
    """One rubric row, as an otter test case."""

    item: rubric.Item
    public_node: str  # "checks/test_public_x.py::test_name" for a public row, else ""

    @property
    def hidden(self) -> bool:
        return self.item.visibility != "visible"

    @property
    def function(self) -> str:
        name = "test_" + re.sub(r"\W+", "_", self.item.number)
        return name + "_" if keyword.iskeyword(name) else name


def public_node(item: rubric.Item) -> str:
    """``checks/<file>::<test>`` of a public row (where ``grader.check`` finds it next to the notebook)."""
    if item.suite != rubric.PUBLIC:
        return ""
    checks = ROOT / "assignment" / "checks"
    found = [p for p in sorted(checks.glob("test_*.py")) if re.search(rf"^def {item.test}\(", p.read_text(), re.M)]
    if len(found) != 1:
        raise RuntimeError(f"public rubric row {item.number}: {item.test} is defined in {len(found)} files of {checks}")
    return f"checks/{found[0].name}::{item.test}"


def rubric_rows() -> list[Row]:
    return [Row(item, public_node(item)) for item in rubric.ITEMS]


def _num(value: float) -> str:
    return f"{value:g}" if float(value).is_integer() else repr(float(value))


def _py(value: object) -> str:
    """A Python literal (JSON strings are valid Python strings)."""
    return json.dumps(value, ensure_ascii=False)


LOADER = """\
#: The helpers' module (its edition in autograder/packaging/) and its SHA-256 when this file was built.  The staff's
#: is in the otter zip's files/ (otter copies it over any submitted file of that name), the public one next to the
#: student's notebook.
AMP_BRIDGE = ({name}, {digest})


def amp_bridge():
    \"\"\"The helpers' module from the current folder, or None when it is missing or not the one built with.\"\"\"
    path = pathlib.Path.cwd() / AMP_BRIDGE[0]
    source = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
    source = source.replace(b"\\r\\n", b"\\n")  # line ends as a Windows checkout may have changed them
    if hashlib.sha256(source).hexdigest() != AMP_BRIDGE[1]:
        return None  # never run: it may be anything
    key = "amp_otter_bridge_" + AMP_BRIDGE[1][:16]
    if key not in sys.modules:  # the bytes just checked, not a second read of the file
        module = types.ModuleType(key)
        module.__file__ = str(path)
        exec(compile(source, str(path), "exec"), module.__dict__)
        sys.modules[key] = module
    return sys.modules[key]


def amp_cases(grading):
    \"\"\"(name, points, hidden, verdict) per case; without a trustworthy bridge, every case fails saying why.\"\"\"
    try:
        bridge = amp_bridge()
        if bridge is not None:
            return bridge.cases(AMP_ROWS, grading, AMP_WORDS)
        problem = AMP_WORDS["bridge_changed"].format(bridge=AMP_BRIDGE[0])
    except Exception as exc:
        problem = AMP_WORDS["bridge_broken"].format(bridge=AMP_BRIDGE[0], error=repr(exc))
    if grading:
        message = AMP_WORDS["setup_error"].format(problem=problem)
    else:
        message = AMP_WORDS["download_bridge"].format(problem=problem, bridge=AMP_BRIDGE[0])

    def verdict():
        raise AssertionError(message)
    return [(f"{{row[0]}} {{row[1]}}", row[2], row[3], verdict) for row in AMP_ROWS if grading or row[4]]


def amp_case(verdict):
    def case():
        verdict()  # this rubric row's verdict: returns, or fails with the autograder's message
    return case


for amp_index, amp_row in enumerate(amp_cases(bool(getattr(Notebook, "_grading_mode", False)))):
    globals()[f"amp_case_{{amp_index:02d}}"] = test_case(name=amp_row[0], points=amp_row[1],
                                                        hidden=amp_row[2])(amp_case(amp_row[3]))
"""


def bridge_source(public: bool = False) -> bytes:
    """The helpers' module as shipped (``amp_otter_bridge.py``): the bytes of its edition (:data:`BRIDGES`)."""
    return BRIDGES[public].read_bytes()


def bridge_digest(public: bool = False) -> str:
    """What the test files compare with: SHA-256 of the bridge with ``\\n`` line ends (as the loader reads it)."""
    return hashlib.sha256(bridge_source(public).replace(b"\r\n", b"\n")).hexdigest()


def write_bridge(folder: Path, public: bool = False) -> Path:
    """Write the helpers' module (``public``: the students' edition) into ``folder`` under its shipped name."""
    path = folder / BRIDGE_NAME
    path.write_bytes(bridge_source(public))
    return path


#: What a test file's words open with in ``autograder/engine/judge_words.py`` (the bridge's names leave it out).
WORDS_PREFIX = "otter."


def bridge_texts(language: str) -> dict[str, str]:
    """The words a test file hands its bridge (``otter_bridge.Texts``) in ``language``: the ``otter.*`` messages of
    ``autograder/engine/judge_words.py``, the language's code and its setting's name, the setting that names the folder
    the public checks grade, and how the judge's notes open and say that files are missing (the grader's own table,
    :mod:`autograder.engine.strings`), to tell a missing file once per question."""
    texts = {key[len(WORDS_PREFIX):]: judge_words.template(key, language) for key in judge_words.EN
             if key.startswith(WORDS_PREFIX)}
    return {**texts, "language": language, "setting": settings.LANGUAGE.env, "submission": settings.SUBMISSION.env,
            "about": strings.template(language, "about_submission"),
            "missing": words.telling_words(strings.template(language, "intake.missing"))}


def render_test_file(task: str, rows: list[Row], *, public_only: bool = False, language: str = words.DEFAULT) -> str:
    """The otter exception-based test file of one task: its rows and words (in ``language``) and a loader of the
    bridge module."""
    question, title = QUESTIONS[task]
    chosen = [r for r in rows if r.item.task == task and not (public_only and r.hidden)]
    points = sum(r.item.points for r in chosen)
    task_points = sum(item.points for item in rubric.ITEMS if item.task == task)  # what the task is worth
    table = "".join(f"    ({_py(r.item.number)}, {_py(strings.title(r.item, language))}, {_num(r.item.points)}, "
                    f"{r.hidden}, {_py(r.public_node)}),\n" for r in chosen)
    texts = "".join(f"    {_py(key)}: {_py(text)},\n" for key, text in bridge_texts(language).items())
    lines = [
        f'"""{title}: otter test file; the task is worth {_num(task_points)} points'
        + (f" ({_num(points)} in the public rows here, the rest in hidden rows the autograder grades)."
           if points != task_points else "."),
        "",
        "Generated by autograder/packaging/otter_build.py from autograder/engine/rubric.py: do not edit.  One case per",
        "rubric row (number, title, points, hidden, public check), defined when otter loads this file:",
        "in otter's grading run from the verdicts of the isolated judge (python -m autograder grade; a",
        "partly passed row becomes its passed and its failed part), in a student's notebook by running",
        f"the public checks in checks/ with pytest.  The code that does it is {BRIDGE_NAME}",
        f"(autograder/packaging/{BRIDGES[public_only].name}), loaded only if its SHA-256 is the one below.",
        '"""',
        "",
        "import hashlib",
        "import pathlib",
        "import sys",
        "import types",
        "",
        "from otter import Notebook",
        "from otter.test_files import test_case",
        "",
        "OK_FORMAT = False",
        "",
        f"name = {_py(question)}",
        f"# points: {_num(points)}, the sum of the rows' (not set as `points`, which would be checked against a",
        "# float sum of a partly passed row's two parts)",
        "",
        "AMP_ROWS = [",
        table.rstrip("\n"),
        "]",
        f"# what the cases say, in {language} (autograder/packaging/otter_build.py's bridge_texts)",
        "AMP_WORDS = {",
        texts.rstrip("\n"),
        "}",
        LOADER.format(name=_py(BRIDGE_NAME), digest=_py(bridge_digest(public_only))).rstrip(),
    ]
    return "\n".join(lines).rstrip() + "\n"


def write_tests(out: Path, rows: list[Row], *, public_only: bool = False, language: str = words.DEFAULT) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for task, (question, _) in QUESTIONS.items():
        path = out / f"{question}.py"
        path.write_text(render_test_file(task, rows, public_only=public_only, language=language), encoding="utf-8")
        written.append(path)
    return written


def _add(bundle: zipfile.ZipFile, arcname: str, data: bytes) -> None:
    info = zipfile.ZipInfo(arcname, ZIP_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    bundle.writestr(info, data)


def grader_zip(path: Path) -> None:
    """The grader as the judge needs it: the packages ``autograder/`` (hidden tests included) and ``checks/``,
    side by side as pip installs them (``python -m autograder`` from the extracted folder imports both)."""
    with zipfile.ZipFile(path, "w") as bundle:
        for folder in (PACKAGE, locations.PUBLIC_CHECKS):
            for file in sorted(p for p in folder.rglob("*") if p.is_file()):
                if "__pycache__" in file.parts or file.suffix == ".pyc" or file.name in NOT_IN_GRADER:
                    continue
                _add(bundle, f"{folder.name}/{file.relative_to(folder).as_posix()}", file.read_bytes())


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
    """The environment for running otter here: it imports the plugin (``autograder.packaging.otter_plugin``) by name."""
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


def build(out: Path, language: str = words.DEFAULT) -> Path:
    """Write the otter autograder zip to ``out`` with ``otter generate``; its cases speak ``language`` and have the
    judge grade in it."""
    check_otter_version()
    rows = rubric_rows()
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="amp-otter-build-") as tmp:
        stage = Path(tmp)
        write_tests(stage / "tests", rows, language=language)
        grader_zip(stage / GRADER_ZIP_NAME)
        (stage / DRIVER_NAME).write_text(driver_notebook(), encoding="utf-8")
        write_bridge(stage)
        (stage / "requirements.txt").write_text(requirements(), encoding="utf-8")
        (stage / "otter_config.json").write_text(json.dumps(otter_config(), indent=2) + "\n", encoding="utf-8")
        command = [sys.executable, "-m", "otter", "generate", "--tests-dir", "tests", "--output-path", str(out),
                   "--config", "otter_config.json", "--requirements", "requirements.txt", "--no-environment",
                   "--python-version", PYTHON_VERSION, GRADER_ZIP_NAME, DRIVER_NAME, BRIDGE_NAME]
        subprocess.run(command, cwd=stage, check=True, env=otter_env())
    with zipfile.ZipFile(out, "a") as bundle:  # the plugin, importable by run_otter.py from the zip's root
        _add(bundle, "autograder/__init__.py", b'"""The otter plugin of the AMP homework\'s autograder."""\n')
        _add(bundle, "autograder/packaging/__init__.py", b"")
        _add(bundle, "autograder/packaging/otter_plugin.py", Path(__file__).with_name("otter_plugin.py").read_bytes())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "otter-autograder.zip")
    parser.add_argument("--tests-only", type=Path, metavar="DIR", help="only write the otter test files to DIR")
    parser.add_argument("--public-only", action="store_true", help="with --tests-only: leave out hidden rows")
    parser.add_argument("--language", choices=words.LANGUAGES, default=words.DEFAULT,
                        help="what the cases say and the judge grades in (default: en)")
    args = parser.parse_args(argv)
    if args.tests_only:
        for path in write_tests(args.tests_only, rubric_rows(), public_only=args.public_only, language=args.language):
            print(f"wrote {path}")
        print(f"wrote {write_bridge(args.tests_only, args.public_only)} (the test files load it from their folder)")
        return 0
    path = build(args.out, args.language)
    built.record(path, built.rebuild_command(path, "otter", "autograder.packaging.otter_build", list(argv or sys.argv[1:]),
                                             AMP_LANGUAGE="" if args.language == words.DEFAULT else args.language))
    with zipfile.ZipFile(path) as bundle:
        names = bundle.namelist()
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB): " + ", ".join(sorted(names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
