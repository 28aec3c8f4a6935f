"""docs/changing.md's "Add a row" steps, walked on a copy of the project, as an instructor would.

The extension is the guide's example: ``ToyLossScaler.is_enabled()`` returns ``True`` (as torch's
``GradScaler(enabled=True)``), a hidden row worth 1 point graded on inputs of its own (a hidden test, no public
example), the point taken from row 1.10 so the totals stay.  :data:`STEPS` are the hand edits, each a textual patch whose old text must occur once
(the way ``tests/catalogue`` patches the solution: a step that no longer applies breaks loudly); then the guide's
commands regenerate the skeleton and the README's points table, and the copy's own tests of the rubric pass and
its grader gives the solution full marks, the skeleton 0 and the catalogued bug of the new row exactly that row.

The number of files edited by hand is counted here, the deliberate pins (``tests/test_rubric_pins.py``, the one
place that copies rows by hand) apart: the goal is at most 8 besides them.
"""

from __future__ import annotations

import json
import os
import re
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


IS_ENABLED = '''    def is_enabled(self) -> bool:
        """Return True: a ToyLossScaler always scales (as torch's GradScaler(enabled=True))."""
        # BEGIN SOLUTION
        return True
        # END SOLUTION
'''
ROW = '''    Item("1.19", "test_is_enabled", "is_enabled() is True, as torch's", 1, "scaler",
         reaches="__init__", ko="is_enabled()는 torch처럼 True"),
'''
CHECK = '''def enabled(student: Any, kwargs: dict[str, Any]) -> None:
    """is_enabled() is True, as torch's GradScaler(enabled=True) says, whatever the constructor was given."""
    args = {"world": cases.world([[[2]]]),
            "ops": [{"op": "new", "kwargs": kwargs}, {"op": "call", "method": "is_enabled"}]}
    expected, got = cases.torch_results(args), _run(student, args)
    what = say("what.is_enabled")
    expect.no_errors(args, got, what)
    expect.check_results(args, expected, got, only=["call"], what=what)


'''
#: The hidden test: the row's own inputs (constructors the public checks never show).
HIDDEN_TEST = '''

def test_is_enabled(student: Any) -> None:
    for kwargs in ({}, {"init_scale": 8.0, "growth_interval": 3}, {"init_scale": 2.0**-24, "backoff_factor": 0.25}):
        behaviours.enabled(student, kwargs)
'''
LAST_TEST = ("    behaviours.state_round_trip(student, kwargs, overflows)\n")
BUG = '''    bug("is_enabled_false", "is_enabled() returns False.",
        Patch(S, "        # BEGIN SOLUTION\\n        return True\\n", "        # BEGIN SOLUTION\\n        return False\\n"),
        fail={"1.19"}, band=(89, 89)),
'''

#: The hand edits of the guide's "Add a row" example, in the guide's order.
STEPS: tuple[Edit, ...] = (
    # 1. the row's declaration: number, test, titles (every language), points, visibility; a point moved from 1.10
    Edit("autograder/engine/rubric.py", '"One backoff per update, however many overflow", 3,',
         '"One backoff per update, however many overflow", 2,'),
    Edit("autograder/engine/rubric.py", 'reaches="__init__", ko="생성자 기본값이 torch와 같음", inputs=PUBLIC),\n',
         'reaches="__init__", ko="생성자 기본값이 torch와 같음", inputs=PUBLIC),\n' + ROW),
    # 2. the solution (its solution block becomes the skeleton's stub)
    Edit("solutions/loss_scaler.py", "        return self._growth_tracker\n        # END SOLUTION\n",
         "        return self._growth_tracker\n        # END SOLUTION\n\n" + IS_ENABLED),
    # 3. the handouts, in both languages
    Edit("assignment/README.md", "returns\nthe tracker as an `int`.",
         "returns\nthe tracker as an `int`; **`is_enabled()`** returns `True`, as torch's `GradScaler(enabled=True)`."),
    Edit("assignment/README.ko.md", "추적기를 `int`로\n돌려줍니다.",
         "추적기를 `int`로\n돌려줍니다. **`is_enabled()`**는 torch의 `GradScaler(enabled=True)`처럼 `True`를 돌려줍니다."),
    # 4. the check (one behaviour) and the hidden test that calls it with the row's own inputs
    # 5. (no scenario operation: the check calls the method through the generic {"op": "call", "method": ...})
    Edit("assignment/checks/judge/behaviours.py", "def defaults(student: Any) -> None:\n",
         CHECK + "def defaults(student: Any) -> None:\n"),
    Edit("autograder/hidden/test_hidden_scaler.py", LAST_TEST, LAST_TEST + HIDDEN_TEST),
    # 6. what the check says when it fails, and the catalogued mistake's words, in both languages
    Edit("assignment/checks/words.py", '"what.defaults": "ToyLossScaler() must have torch\'s defaults:',
         '"what.is_enabled": "ToyLossScaler().is_enabled() must be True, as torch\'s GradScaler(enabled=True).",\n'
         '    "what.defaults": "ToyLossScaler() must have torch\'s defaults:'),
    Edit("assignment/checks/words.py", '"what.defaults": "ToyLossScaler()의 기본값은',
         '"what.is_enabled": "ToyLossScaler().is_enabled()는 torch의 GradScaler(enabled=True)처럼 True여야 합니다.",\n'
         '    "what.defaults": "ToyLossScaler()의 기본값은'),
    # 7. a catalogued bug that loses the row, and its "Likely mistake" words in both languages (checks/words.py
    #    MISTAKES: looked up when the line is shown, so no diagnosis table holds them)
    Edit("tests/catalogue/catalogue.py", "SCALE_STATE_BUGS = [\n", "SCALE_STATE_BUGS = [\n" + BUG),
    Edit("assignment/checks/words.py", '"scale_tuple_becomes_list": "scale() returns a list when given a tuple",\n',
         '"scale_tuple_becomes_list": "scale() returns a list when given a tuple",\n'
         '        "is_enabled_false": "is_enabled() returns False",\n'),
    Edit("assignment/checks/words.py", '"scale_tuple_becomes_list": "scale()이 tuple을 받았는데 list를 돌려줄",\n',
         '"scale_tuple_becomes_list": "scale()이 tuple을 받았는데 list를 돌려줄",\n'
         '        "is_enabled_false": "is_enabled()가 False를 돌려줄",\n'),
    # 8. the deliberate pins, by hand
    Edit("tests/test_rubric_pins.py", '("1.10", "test_one_backoff_per_update", 3, "hidden"),',
         '("1.10", "test_one_backoff_per_update", 2, "hidden"),'),
    Edit("tests/test_rubric_pins.py", '("1.18", "test_defaults_and_restored_state", 1, "hidden"),\n',
         '("1.18", "test_defaults_and_restored_state", 1, "hidden"),\n'
         '    ("1.19", "test_is_enabled", 1, "hidden"),\n'),
    Edit("tests/test_rubric_pins.py", "5 public rows (16 pts) + 12 hidden rows", "5 public rows (16 pts) + 13 hidden rows"),
    Edit("tests/test_rubric_pins.py", "    'scale_tuple_becomes_list':\n        'scale() returns a list when given a tuple',\n",
         "    'scale_tuple_becomes_list':\n        'scale() returns a list when given a tuple',\n"
         "    'is_enabled_false':\n        'is_enabled() returns False',\n"),
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
#: The files besides the pins the example takes now: lower it when a step's file drops out (the mistake words'
#: English table, when they move beside the Korean ones: 8); a step that adds a copy of a row fails here.
HAND_EDITED_NOW = 8


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


# About 25 s on an idle machine (a copy of the project, its rubric tests, three submissions graded): in make test.
def test_walking_the_guide_adds_a_row_that_the_grader_grades(tmp_path: Path) -> None:
    root = copy_project(tmp_path / "project")
    apply(root)
    for command in COMMANDS:
        done = run_in(root, command)
        assert done.returncode == 0, f"{command}: {done.stderr[-3000:]}"
    assert "| Task 1 `ToyLossScaler` | 50 | 5 public rows (16 pts) + 13 hidden rows" in (root / "README.md").read_text()
    skeleton = (root / "assignment" / "loss_scaler.py").read_text(encoding="utf-8")
    assert re.search(r"def is_enabled\(self\) -> bool:\n.*\n\s+raise NotImplementedError", skeleton)

    done = run_in(root, [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                         "-o", "addopts=", *PROOFS])
    assert done.returncode == 0, done.stdout[-4000:]

    bugs = tmp_path / "bugs"
    done = run_in(root, [sys.executable, "tests/catalogue/catalogue.py", "materialize", str(bugs)])
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    done = run_in(root, [sys.executable, "-m", "autograder", "grade", "solutions", "assignment",
                         str(bugs / "bug-is_enabled_false"), "--out", str(out)])
    assert done.returncode == 0, done.stderr[-3000:]
    results = {name: json.loads((out / name / "results.json").read_text())
               for name in ("solutions", "assignment", "bug-is_enabled_false")}
    assert results["solutions"]["score"] == 90
    assert results["assignment"]["score"] == 0
    assert results["bug-is_enabled_false"]["score"] == 89
    rows = {test["number"]: test for test in results["solutions"]["tests"]}
    assert (rows["1.19"]["max_score"], rows["1.19"]["score"], rows["1.10"]["max_score"]) == (1, 1, 2)
    assert rows["1.19"]["name"] == "1.19 is_enabled() is True, as torch's"
    lost = [test["number"] for test in results["bug-is_enabled_false"]["tests"]
            if test.get("max_score") and test["score"] < test["max_score"]]
    assert lost == ["1.19"], lost
