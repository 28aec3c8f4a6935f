"""docs/changing.md's "Add a row" steps, walked on a copy of the project, as an instructor would.

The extension is the guide's example: a hidden row worth 1 point graded on inputs of its own, for a clause the
handout states and no row graded: ``scale()`` of what is neither a tensor nor a list/tuple of them raises
``ValueError``, as torch's (the handout shows ``scaler.scale(2.0)`` doing so).  Its public example is the handout's
call; its hidden test tries other values; the point is taken from row 1.10 so the totals stay.  :data:`STEPS` are the
hand edits, each a textual patch whose old text must occur once (the way ``tests/catalogue`` patches the solution: a
step that no longer applies breaks loudly); then the guide's commands regenerate what they regenerate, and:

* in ``make test``: the copy's own tests of the rubric pass and its grader gives the solution full marks, the
  skeleton 0 and the catalogued bug of the new row exactly that row;
* in ``make test-all``: ``make student`` and ``make golden`` in the copy, then its whole ``make test`` passes.

The number of files edited by hand is counted here, the deliberate pins (``tests/test_rubric_pins.py``, the one
place that copies rows by hand) apart: the goal is at most 8 besides them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT

GUIDE = ROOT / "docs" / "changing.md"


@dataclass(frozen=True)
class Edit:
    file: str
    old: str
    new: str


ROW = '''    Item("1.19", "test_scale_refuses_what_is_no_tensor", "scale() of a number or None raises ValueError", 1,
         "scaler", reaches="scale", ko="scale()에 숫자나 None을 주면 ValueError"),
'''
CHECK = '''def refuses_no_tensor(student: Any, value: Json) -> None:
    \"\"\"scale() of what is neither a tensor nor a list/tuple of them raises ValueError, as torch's (the handout's
    clause).\"\"\"
    ops = [{"op": "new", "kwargs": {}}, {"op": "call", "method": "scale", "args": [value]}]
    args = {"world": cases.world([[[1]]]), "ops": ops}
    results = _run(student, args)
    what = say("what.no_tensor")
    expect.no_errors(args, results[:-1], what)
    if not expect.raised(results[-1], "ValueError"):
        expect.mismatch(args, len(ops) - 1, say("do.raise", error="ValueError"), results[-1], what=what,
                        step_return=False)


'''
#: The hidden test: the row's own inputs (values the public example never shows).
HIDDEN_TEST = '''

def test_scale_refuses_what_is_no_tensor(student: Any) -> None:
    for value in (3, None, True):
        behaviours.refuses_no_tensor(student, value)
'''
LAST_TEST = ("    behaviours.state_round_trip(student, kwargs, overflows)\n")
#: The public example: the handout's own (``scaler.scale(2.0)``).
PUBLIC_TEST = '''

def test_scale_refuses_what_is_no_tensor(student: Any) -> None:
    behaviours.refuses_no_tensor(student, 2.0)
'''
LAST_PUBLIC = "def test_defaults_and_restored_state(student: Any) -> None:\n    behaviours.defaults(student)\n"
BUG = '''    bug("scale_of_number_scaled", "scale() of a Python number returns it scaled instead of raising ValueError.",
        Patch(S, '        raise ValueError("outputs must be a Tensor or a list/tuple of Tensors")\\n',
              "        if isinstance(outputs, (int, float)):\\n            return outputs * self._scale\\n"
              '        raise ValueError("outputs must be a Tensor or a list/tuple of Tensors")\\n'),
        fail={"1.19"}, band=(89, 89)),
'''

#: The hand edits of the guide's "Add a row" example, in the guide's order.
STEPS: tuple[Edit, ...] = (
    # 1. the row's declaration: number, test, titles (every language), points, visibility; a point moved from 1.10
    Edit("autograder/engine/rubric.py", '"One backoff per update, however many overflow", 3,',
         '"One backoff per update, however many overflow", 2,'),
    Edit("autograder/engine/rubric.py", 'reaches="__init__", ko="생성자 기본값이 torch와 같음", inputs=PUBLIC),\n',
         'reaches="__init__", ko="생성자 기본값이 torch와 같음", inputs=PUBLIC),\n' + ROW),
    # 2. (the behaviour is the contract's already: solutions/, the handouts and every shipped submission keep it)
    # 3. the check (one behaviour), the hidden test that calls it with the row's own inputs, and its public example
    # 4. (no scenario operation: the check calls the method through the generic {"op": "call", ...})
    Edit("assignment/checks/judge/behaviours.py", "def defaults(student: Any) -> None:\n",
         CHECK + "def defaults(student: Any) -> None:\n"),
    Edit("autograder/hidden/test_hidden_scaler.py", LAST_TEST, LAST_TEST + HIDDEN_TEST),
    Edit("assignment/checks/test_public_scaler.py", LAST_PUBLIC, LAST_PUBLIC + PUBLIC_TEST),
    # 5. what the check says when it fails, and the catalogued mistake's words, in both languages
    Edit("assignment/checks/words.py", '"what.defaults": "ToyLossScaler() must have torch\'s defaults:',
         '"what.no_tensor": "scale() of what is neither a tensor nor a list/tuple of tensors must raise ValueError, '
         'as torch\'s GradScaler.scale.",\n'
         '    "what.defaults": "ToyLossScaler() must have torch\'s defaults:'),
    Edit("assignment/checks/words.py", '"what.defaults": "ToyLossScaler()의 기본값은',
         '"what.no_tensor": "텐서도 텐서의 list/tuple도 아닌 값을 받은 scale()은 torch의 GradScaler.scale처럼 '
         'ValueError를 일으켜야 합니다.",\n'
         '    "what.defaults": "ToyLossScaler()의 기본값은'),
    # 6. a catalogued bug that loses the row, and its "Likely mistake" words in both languages (checks/words.py
    #    MISTAKES: looked up when the line is shown, so no diagnosis table holds them)
    Edit("tests/catalogue/catalogue.py", "SCALE_STATE_BUGS = [\n", "SCALE_STATE_BUGS = [\n" + BUG),
    Edit("assignment/checks/words.py", '"scale_tuple_becomes_list": "scale() returns a list when given a tuple",\n',
         '"scale_tuple_becomes_list": "scale() returns a list when given a tuple",\n'
         '        "scale_of_number_scaled": "scale() returns a Python number scaled instead of raising ValueError",\n'),
    Edit("assignment/checks/words.py", '"scale_tuple_becomes_list": "scale()이 tuple을 받았는데 list를 돌려줄",\n',
         '"scale_tuple_becomes_list": "scale()이 tuple을 받았는데 list를 돌려줄",\n'
         '        "scale_of_number_scaled": "scale()이 파이썬 숫자를 받았는데 ValueError 대신 스케일한 값을 돌려줄",\n'),
    # 7. the deliberate pins, by hand
    Edit("tests/test_rubric_pins.py", '("1.10", "test_one_backoff_per_update", 3, "hidden"),',
         '("1.10", "test_one_backoff_per_update", 2, "hidden"),'),
    Edit("tests/test_rubric_pins.py", '("1.18", "test_defaults_and_restored_state", 1, "hidden"),\n',
         '("1.18", "test_defaults_and_restored_state", 1, "hidden"),\n'
         '    ("1.19", "test_scale_refuses_what_is_no_tensor", 1, "hidden"),\n'),
    Edit("tests/test_rubric_pins.py", "5 public rows (16 pts) + 12 hidden rows", "5 public rows (16 pts) + 13 hidden rows"),
    Edit("tests/test_rubric_pins.py", "    'scale_tuple_becomes_list':\n        'scale() returns a list when given a tuple',\n",
         "    'scale_tuple_becomes_list':\n        'scale() returns a list when given a tuple',\n"
         "    'scale_of_number_scaled':\n        'scale() returns a Python number scaled instead of raising ValueError',\n"),
)

#: What the guide's commands regenerate (no hand edit): the skeleton, the README's points table.
COMMANDS = (
    [sys.executable, "-c", "from pathlib import Path; from autograder.packaging.release import write_release; "
                           "write_release(Path('solutions'), Path('assignment'))"],
    [sys.executable, "-m", "autograder", "rubric", "--readme", "README.md"],
)
#: The copy's own tests that prove the rubric change (the guide names them).
PROOFS = ("tests/test_rubric_declared.py", "tests/test_ops_table.py", "tests/test_replies.py", "tests/test_rubric_pins.py::test_every_cpu_row_is_pinned",
          "tests/test_rubric_pins.py::test_points_per_task_are_pinned",
          "tests/test_rubric_pins.py::test_the_readme_points_table_is_pinned",
          "tests/test_rubric_pins.py::test_every_catalogued_bug_keeps_its_words",
          "tests/test_handout_feedback_language.py::test_every_rubric_row_has_a_title_in_every_language",
          "tests/test_handout_sync.py::test_korean_handout_is_in_step_with_the_english_one",
          "tests/test_release.py::test_assignment_is_in_sync_with_solutions")
#: The one file that copies rows by hand on purpose (its pins are deliberate): counted apart from the others.
PINS = "tests/test_rubric_pins.py"
#: The most files besides the pins the example may need edited by hand (the goal).
MOST_HAND_EDITS = 8
#: The files besides the pins the example takes now: a step that adds a copy of a row fails here.
HAND_EDITED_NOW = 6


def hand_edited() -> list[str]:
    return sorted({edit.file for edit in STEPS})


def besides_pins() -> list[str]:
    return [name for name in hand_edited() if name != PINS]


def apply(root: Path, steps: tuple[Edit, ...] = STEPS) -> None:
    for edit in steps:
        path = root / edit.file
        text = path.read_text(encoding="utf-8")
        assert text.count(edit.old) == 1, f"{edit.file}: the guide's step no longer applies: {edit.old!r}"
        path.write_text(text.replace(edit.old, edit.new), encoding="utf-8")


def copy_project(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def run_in(root: Path, command: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``command`` in the copy, importing the copy's grader and checks (not this checkout's); the run's plan cache
    (conftest's ``plan_cache``), never the user's."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AMP_") or key == "AMP_PLAN_CACHE"}
    env.update(PYTHONPATH=f"{root}{os.pathsep}{root / 'assignment'}", AMP_DIAGNOSIS="off", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_guide_names_every_file_the_example_edits() -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    section = guide.split("## Add a row", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in hand_edited() if f"`{name}`" not in section]
    assert not missing, f"docs/changing.md's 'Add a row' does not name {missing}"


def test_the_pins_are_the_only_file_counted_apart() -> None:
    assert sorted(set(hand_edited()) - set(besides_pins())) == [PINS]


def test_the_example_edits_exactly_the_files_it_takes_now() -> None:
    """What the example takes, counted: a step that adds a copy of a row (a file more) fails here."""
    assert len(besides_pins()) == HAND_EDITED_NOW, besides_pins()


def test_the_example_takes_at_most_eight_hand_edited_files_besides_the_pins() -> None:
    assert len(besides_pins()) <= MOST_HAND_EDITS, besides_pins()


BUG_FOLDER = "bug-scale_of_number_scaled"


# About 25 s on an idle machine (a copy of the project, its rubric tests, three submissions graded): in make test.
def test_walking_the_guide_adds_a_row_that_the_grader_grades(tmp_path: Path) -> None:
    root = walked(tmp_path / "project")
    assert "| Task 1 `ToyLossScaler` | 50 | 5 public rows (16 pts) + 13 hidden rows" in (root / "README.md").read_text()

    done = run_in(root, [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                         "-o", "addopts=", *PROOFS])
    assert done.returncode == 0, done.stdout[-4000:]

    bugs = tmp_path / "bugs"
    done = run_in(root, [sys.executable, "tests/catalogue/catalogue.py", "materialize", str(bugs)])
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    done = run_in(root, [sys.executable, "-m", "autograder", "grade", "solutions", "assignment",
                         str(bugs / BUG_FOLDER), "--out", str(out)])
    assert done.returncode == 0, done.stderr[-3000:]
    results = {name: json.loads((out / name / "results.json").read_text())
               for name in ("solutions", "assignment", BUG_FOLDER)}
    assert results["solutions"]["score"] == 90
    assert results["assignment"]["score"] == 0
    assert results[BUG_FOLDER]["score"] == 89
    rows = {test["number"]: test for test in results["solutions"]["tests"]}
    assert (rows["1.19"]["max_score"], rows["1.19"]["score"], rows["1.10"]["max_score"]) == (1, 1, 2)
    assert rows["1.19"]["name"] == "1.19 scale() of a number or None raises ValueError"
    lost = [test["number"] for test in results[BUG_FOLDER]["tests"]
            if test.get("max_score") and test["score"] < test["max_score"]]
    assert lost == ["1.19"], lost


# About 20 minutes on 2 cores (make setup, make student, make golden, then the copy's whole make test): in make
# test-all.
@pytest.mark.slow
def test_after_the_guides_commands_make_test_passes(tmp_path: Path) -> None:
    """The guide's last word: after its steps and commands (``make student``, ``make golden``), ``make test`` passes
    in the copy, every test the project has (this file's walks apart: the copy has walked its guide already)."""
    root = walked(tmp_path / "project")
    # the copy's own .venv, as in an instructor's clone (this checkout's holds an editable install of this checkout)
    env = {key: value for key, value in os.environ.items()
           if key not in ("VENV", "PYTHONPATH", "VIRTUAL_ENV") and (not key.startswith("AMP_") or key == "AMP_PLAN_CACHE")}
    env.update(PYTHONDONTWRITEBYTECODE="1", CI="true")
    for target in ("student", "golden"):
        done = subprocess.run(["make", target], cwd=root, env=env, capture_output=True, text=True, timeout=3600)
        assert done.returncode == 0, f"make {target}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    done = subprocess.run(["make", "test", "PYTEST_ARGS=--deselect tests/test_changing_guide.py -rfE"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=3600)
    failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    assert done.returncode == 0, "\n".join(failed) + done.stdout[-3000:]


def walked(root: Path) -> Path:
    """A copy of the project with the guide's steps applied and its commands run."""
    copy_project(root)
    apply(root)
    for command in COMMANDS:
        done = run_in(root, command)
        assert done.returncode == 0, f"{command}: {done.stderr[-3000:]}"
    return root
