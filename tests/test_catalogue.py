"""Grades the catalogue of buggy and correct submissions (tests/catalogue) and checks the verdicts.

* every bug loses points on exactly the rubric rows it names (``must_fail``; the differential
  row 1.11 may fail on top) and its total lies in its band: one cause, one deduction;
* the rows-per-bug median and maximum (besides 1.11) are printed;
* every bug's first failure snippet, pasted into a fresh Python next to the bug's files,
  prints the wrong value the grader reported (and does not with the solution);
* every correct variant gets full marks;
* together the bugs catch every row of Tasks 1 and 2.

All entries are graded by one ``python -m autograder grade`` run (a session-scoped fixture;
its few worker processes import torch once each).  Entries marked ``known_gap`` are grader gaps reported
to staff: they are strict xfails, so fixing the grader turns them into failures that ask
for the mark to be removed.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from autograder.diagnosis.table import Table
from autograder.engine import rubric
from checks import arithmetic
from conftest import ROOT, grade


def _load_catalogue() -> Any:
    """tests/catalogue/catalogue.py, loaded by path (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("amp_catalogue", ROOT / "tests" / "catalogue" / "catalogue.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    if not hasattr(module, "ENTRIES"):
        spec.loader.exec_module(module)
    return module


catalogue = _load_catalogue()
BUGS, VARIANTS, ENTRIES = catalogue.BUGS, catalogue.VARIANTS, catalogue.ENTRIES
CONTRACT, SOLUTIONS, Entry, materialize = catalogue.CONTRACT, catalogue.SOLUTIONS, catalogue.Entry, catalogue.materialize
MAX = rubric.max_points()
ITEMS = {item.number: item for item in rubric.ITEMS}
#: Task-2 rows whose tests run the submission's own ToyLossScaler (so a Task-1 bug may cost them): none, since
#: 2.9 and 2.10 run amp_step with torch's scaler.
USES_STUDENT_SCALER: set[str] = set()
#: The differential row: it compares everything with torch, so any Task-1 bug may fail it on top of its own rows.
CATCH_ALL = "1.11"
GRADE_TIMEOUT_S = 1800
#: Grade into this folder (CI keeps the grades there to compare Pythons: .ci/run), or reuse the grades already
#: there (a debugging aid).
REUSE_ENV = "AMP_CATALOGUE_GRADES"
#: Where the session's grading run wrote (its staff.log files say whether the call plan graded each entry).
GRADES_FOLDER: list[Path] = []
#: Whether those grades were read from an earlier run rather than graded by this one.
REUSED: list[bool] = []
#: A row's "Likely mistake" paragraph (the diagnosis), as the feedback prints it above the failure.
LIKELY_MISTAKE = re.compile(r"^Likely mistake: this is what happens when [^\n]*\n\n")
#: The staff.log line of a submission graded with the call plan (autograder/engine/plan.py).
PLAN_LINE = re.compile(r"^call plan \([a-z ]+\): (\d+) of \d+ tests passed by matching the reference's answers", re.MULTILINE)


def _param(entry: Entry) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=f"known grader gap: {entry.known_gap}")] if entry.known_gap else []
    return pytest.param(entry, id=entry.name, marks=marks)


@pytest.fixture(scope="session")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """results.json of every entry, by entry name (one grading command for all)."""
    reuse = os.environ.get(REUSE_ENV)
    REUSED.append(bool(reuse) and (Path(reuse) / "gradebook.csv").is_file())
    if REUSED[-1]:  # debugging: read an earlier run's grades
        out, log = Path(reuse), f"(grades reused from {reuse})"
    else:
        base = tmp_path_factory.mktemp("catalogue")
        paths = [materialize(entry, base / "submissions" / entry.folder_name) for entry in ENTRIES]
        out = Path(reuse) if reuse else base / "grades"
        started = time.monotonic()
        # diagnosis on, as in a checkout (the tests' conftest turns it off elsewhere): the committed table
        proc = grade(paths, out, timeout=GRADE_TIMEOUT_S, env={"PYTHONDONTWRITEBYTECODE": "1", "AMP_DIAGNOSIS": ""})
        log = proc.stdout[-4000:] + "\n" + proc.stderr[-4000:]
        assert proc.returncode == 0, f"grading failed ({proc.returncode}):\n{log}"
        print(f"\ngraded {len(ENTRIES)} catalogue submissions in {time.monotonic() - started:.0f} s")
    GRADES_FOLDER.append(out)
    results = {}
    for entry in ENTRIES:
        path = out / entry.folder_name / "results.json"
        assert path.is_file(), f"no results.json for {entry.folder_name}:\n{log}"
        results[entry.name] = json.loads(path.read_text(encoding="utf-8"))
    return results


def rows(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The graded rubric rows of one results.json, by number (informational rows dropped)."""
    return {test["number"]: test for test in results["tests"] if test.get("number") in ITEMS}


def lost(row: dict[str, Any]) -> bool:
    """Whether a row lost points (a 0-point gate row reports its failure through its status)."""
    return row["score"] < row["max_score"] or row["status"] != "passed"


def summary(results: dict[str, Any]) -> str:
    lost_rows = [f"{n} {r['score']:g}/{r['max_score']:g}" for n, r in rows(results).items() if lost(r)]
    return f"total {results['score']:g}/{MAX:g}; lost points on: {', '.join(lost_rows) or 'nothing'}"


def may_lose(entry: Entry, number: str) -> bool:
    """Whether ``entry``'s changes can plausibly cost points on row ``number``."""
    task = ITEMS[number].task
    if task == "quick_check":
        return "answers.py" in entry.touched
    if task == "scaler":
        return "loss_scaler.py" in entry.touched
    if number in USES_STUDENT_SCALER:
        return bool({"amp_step.py", "loss_scaler.py"} & entry.touched)
    return "amp_step.py" in entry.touched


# --------------------------------------------------------------------------- the catalogue itself (fast)


def test_catalogue_is_well_formed(tmp_path: Path) -> None:
    names = [entry.name for entry in ENTRIES]
    assert len(names) == len(set(names)), "duplicate entry names"
    assert len(BUGS) >= 30 and len(VARIANTS) >= 10
    solution = {name: (SOLUTIONS / name).read_text(encoding="utf-8") for name in CONTRACT}
    for entry in ENTRIES:
        folder = materialize(entry, tmp_path / entry.folder_name)  # asserts each patch applies exactly once
        texts = {name: (folder / name).read_text(encoding="utf-8") for name in CONTRACT}
        for name, text in texts.items():
            ast.parse(text, filename=f"{entry.name}/{name}")
        assert texts != solution, f"{entry.name} is the reference solution unchanged"
        assert entry.kind in ("bug", "variant")
        assert entry.must_fail <= ITEMS.keys(), f"{entry.name}: unknown rubric numbers {entry.must_fail - ITEMS.keys()}"
        if entry.kind == "bug":
            assert entry.must_fail, f"{entry.name}: a bug must name the rows it fails"
            low, high = entry.band
            assert 0 <= low <= high < MAX, f"{entry.name}: band {entry.band} must lie below {MAX:g}"
            assert all(may_lose(entry, n) for n in entry.must_fail), \
                f"{entry.name}: must_fail names rows its files cannot affect"
        else:
            assert not entry.must_fail


def test_bugs_cover_every_row_of_tasks_1_and_2() -> None:
    caught = set().union(*(entry.must_fail for entry in BUGS if not entry.known_gap))
    missing = [f"{item.number} {item.test}" for item in rubric.ITEMS
               if item.task in ("scaler", "amp_step") and item.number not in caught]
    assert not missing, f"no catalogue bug is caught by: {missing}"


# --------------------------------------------------------------------------- graded


def lost_rows(results: dict[str, Any]) -> set[str]:
    return {number for number, row in rows(results).items() if lost(row)}


@pytest.mark.parametrize("entry", [_param(entry) for entry in BUGS])
def test_bug_is_caught(graded: dict[str, dict[str, Any]], entry: Entry) -> None:
    """The bug loses exactly the rows it names (1.11 allowed on top), and its total lies in its band."""
    results = graded[entry.name]
    graded_rows = rows(results)
    assert graded_rows.keys() == ITEMS.keys()
    problems = []
    lost_now = lost_rows(results)
    for number in sorted(entry.must_fail - lost_now, key=_order):
        row = graded_rows[number]
        problems.append(f"row {number} ({ITEMS[number].test}) should lose points but scored "
                        f"{row['score']:g}/{row['max_score']:g}")
    for number in sorted(lost_now - entry.must_fail - {CATCH_ALL}, key=_order):
        problems.append(f"row {number} ({ITEMS[number].test}) lost points, but the bug does not name it (one cause, "
                        f"one deduction):\n{graded_rows[number]['output']}")
    low, high = entry.band
    if not low <= results["score"] <= high:
        problems.append(f"total {results['score']:g} outside the band [{low:g}, {high:g}]")
    assert not problems, f"{entry.name} ({entry.description}): {summary(results)}\n- " + "\n- ".join(problems)


def _order(number: str) -> tuple[int, ...]:
    return tuple(int(part) for part in number.split("."))


def rows_per_bug(graded: dict[str, dict[str, Any]]) -> dict[str, int]:
    """How many rows each bug loses besides 1.11 (gate cheats, which zero Task 1 by design, left out)."""
    delegation = {entry.name for entry in catalogue.CHEATS}  # each loses every behaviour it leaves to torch
    return {entry.name: len(lost_rows(graded[entry.name]) - {CATCH_ALL}) for entry in BUGS
            if not entry.known_gap and entry.name not in delegation}


def _spread(counts: dict[str, int]) -> str:
    most = max(counts.values())
    worst = ", ".join(sorted(n for n, c in counts.items() if c == most))
    return f"median {statistics.median(counts.values()):g}, max {most} ({worst}) over {len(counts)} bugs"


def test_rows_per_bug(graded: dict[str, dict[str, Any]]) -> None:
    """Prints the rows-per-bug median and maximum (the goal: median 1, max 2, besides the listed cascades)."""
    counts = rows_per_bug(graded)
    usual = {name: count for name, count in counts.items() if name not in catalogue.CASCADES}
    print(f"\nrows lost per bug besides 1.11: {_spread(counts)}; without the listed cascades: {_spread(usual)}")
    for name, reason in catalogue.CASCADES.items():
        print(f"  cascade {name}: {counts.get(name)} rows ({reason})")
    assert statistics.median(usual.values()) <= 1 and max(usual.values()) <= 2, usual
    told = validation_counts()  # docs/validation.md quotes these counts: they are what was measured
    two = sum(1 for count in usual.values() if count == 2)
    assert told["two_rows"] == two, f"docs/validation.md says {told['two_rows']} other bugs lose 2 rows; {two} do"
    assert told["state_never_cleared"] == counts["state_never_cleared"], "docs/validation.md: state_never_cleared"


NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve", "thirteen", "fourteen", "fifteen")


def validation_counts() -> dict[str, int]:
    """The counts docs/validation.md states: how many other bugs lose 2 rows, how many rows state_never_cleared
    loses; and it names every listed cascade and counts the delegation bugs right (known without a grading)."""
    text = " ".join((ROOT / "docs" / "validation.md").read_text(encoding="utf-8").split())
    two = re.search(r"(\w+) other bugs lose 2 rows", text)
    cascade = re.search(r"`state_never_cleared` \(.*?\) loses (\d+)", text)
    delegation = re.search(r"besides the (\w+) delegation bugs", text)
    assert two and cascade and delegation, "docs/validation.md no longer states its counts in the words read here"
    assert NUMBER_WORDS.index(delegation.group(1).lower()) == len(catalogue.CHEATS)
    cascades = text[cascade.start():two.start()]
    assert all(f"`{name}`" in cascades for name in catalogue.CASCADES), "docs/validation.md: the listed cascades"
    return {"two_rows": NUMBER_WORDS.index(two.group(1).lower()), "state_never_cleared": int(cascade.group(1))}


def test_validation_md_states_the_counts_test_rows_per_bug_checks() -> None:
    """The counts are read (the measured values are checked by test_rows_per_bug, which needs the grading)."""
    assert set(validation_counts()) == {"two_rows", "state_never_cleared"}


# --------------------------------------------------------------------------- snippets reproduce

_SNIPPET = re.compile(r"After running:\n((?:    .*\n)+)the last line should: (?P<want>[\s\S]*?)\nbut with your code it "
                      r"(?P<kind>prints|raises|runs without error) ?(?P<value>.*)")


def first_snippet(results: dict[str, Any]) -> tuple[str, str, str, str] | None:
    """(row number, program, "prints"/"raises"/"runs without error", value) of the first failure with a snippet."""
    for number in sorted(lost_rows(results), key=_order):
        found = _SNIPPET.search(rows(results)[number]["output"])
        if found:
            return number, textwrap.dedent(found.group(1)), found.group("kind"), found.group("value")
    return None


def run_snippet(program: str, files: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run ``program`` in a fresh Python, in a copy of assignment/ holding the contract files of ``files``."""
    shutil.copytree(ROOT / "assignment", folder, ignore=shutil.ignore_patterns("__pycache__", "*.ipynb"))
    for name in CONTRACT:
        shutil.copyfile(files / name, folder / name)
    (folder / "snippet.py").write_text(program, encoding="utf-8")
    # a student's fresh Python: none of the grader's environment, the pinned arithmetic included (the snippet's
    # import of ``checks`` pins it, as in the student's own)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and k not in arithmetic.PORTABLE}
    return subprocess.run([sys.executable, "snippet.py"], cwd=folder, capture_output=True, text=True, timeout=120,
                          env={**env, "OMP_NUM_THREADS": "1"})


def reproduces(done: subprocess.CompletedProcess[str], kind: str, value: str) -> bool:
    """Whether a snippet run did what the failure message said the student's code does."""
    if kind == "raises":
        last = (done.stderr.strip().splitlines() or [""])[-1]
        return done.returncode != 0 and last.split(":", 1)[0].split(".")[-1] == value.split(":", 1)[0]
    if done.returncode != 0:
        return False
    printed = done.stdout.strip().splitlines()
    return kind == "runs without error" or (bool(printed) and printed[-1] == value.strip())


#: Bugs whose failures carry no snippet (their rows observe amp_step or answers.py, not scaler calls).
SNIPPET_BUGS = [entry for entry in BUGS if entry.touched == {"loss_scaler.py"} and entry.must_fail != catalogue.TASK1]


@pytest.mark.parametrize("entry", [_param(entry) for entry in SNIPPET_BUGS])
def test_first_failure_snippet_reproduces(graded: dict[str, dict[str, Any]], entry: Entry, tmp_path: Path) -> None:
    found = first_snippet(graded[entry.name])
    assert found is not None, f"{entry.name}: no failure message with a snippet\n{summary(graded[entry.name])}"
    number, program, kind, value = found
    buggy = run_snippet(program, materialize(entry, tmp_path / "files"), tmp_path / "bug")
    assert reproduces(buggy, kind, value), (
        f"{entry.name}, row {number}: the snippet should {kind} {value!r} with the bug, but it printed "
        f"{buggy.stdout[-500:]!r} and {buggy.stderr[-800:]!r}\n{program}")
    fixed = run_snippet(program, SOLUTIONS, tmp_path / "solution")
    assert not reproduces(fixed, kind, value), (
        f"{entry.name}, row {number}: the snippet does the same with the reference solution ({kind} {value!r}):\n"
        f"{program}")


@pytest.mark.parametrize("entry", [_param(entry) for entry in VARIANTS])
def test_variant_gets_full_marks(graded: dict[str, dict[str, Any]], entry: Entry) -> None:
    results = graded[entry.name]
    failed = {n: r["output"] for n, r in rows(results).items() if lost(r)}
    assert results["score"] == MAX and not failed, \
        f"correct variant {entry.name} ({entry.description}): {summary(results)}\n" + \
        "\n".join(f"--- {n}:\n{text}" for n, text in failed.items())


def test_most_bugs_are_named_and_no_variant_is(graded: dict[str, dict[str, Any]]) -> None:
    """Graded in a checkout with no extra command, at least 80 % of the single-bug submissions get a "Likely
    mistake" line naming their own mistake (or a listed twin); no correct variant gets any."""
    def named(entry: Entry) -> set[str]:
        found = graded[entry.name].get("extra_data", {}).get("diagnosis", {})
        return {bug for bugs in found.values() for bug in bugs}

    bugs = [entry for entry in BUGS if not entry.known_gap]
    hits = [entry.name for entry in bugs if entry.name in named(entry)]
    assert len(hits) >= 0.8 * len(bugs), f"{len(hits)} of {len(bugs)} named: missing " + \
        ", ".join(entry.name for entry in bugs if entry.name not in hits)
    assert not {entry.name: named(entry) for entry in VARIANTS if named(entry)}


def test_a_named_mistake_is_the_bugs_own_and_sits_on_a_failing_row(graded: dict[str, dict[str, Any]]) -> None:
    """Every diagnosis of the catalogue's grades names the entry's own bug (or a listed twin), on a row it failed,
    with the line in that row's output; no other row carries a "Likely mistake" line."""
    table = Table.from_json((ROOT / "autograder" / "hidden" / "diagnosis.json").read_text(encoding="utf-8"))
    wrong = []
    for entry in ENTRIES:
        results = graded[entry.name]
        diagnosis = results.get("extra_data", {}).get("diagnosis", {})
        for test in results["tests"]:
            number, output = test.get("number"), str(test.get("output", ""))
            if number in diagnosis:
                bugs = diagnosis[number]
                if not set(bugs) <= table.twins_of(entry.name) or test["status"] != "failed" \
                        or table.sentence(bugs) not in output:
                    wrong.append(f"{entry.name}: row {number} diagnosed as {bugs}")
            elif LIKELY_MISTAKE.search(output):
                wrong.append(f"{entry.name}: row {number} has a line but no diagnosis")
    assert not wrong, "\n".join(wrong)


def test_listed_twins_are_named_together(graded: dict[str, dict[str, Any]]) -> None:
    """Two bugs that answer every case of row 2.1 alike (listed as twins) are both named, whichever was made."""
    for bug in ("hardcoded_cuda", "no_autocast"):
        assert graded[bug]["extra_data"]["diagnosis"].get("2.1") == ["hardcoded_cuda", "no_autocast"], bug


@pytest.mark.parametrize("entry", [_param(entry) for entry in BUGS])
def test_a_failing_public_check_names_the_graders_mistake(graded: dict[str, dict[str, Any]], entry: Entry,
                                                          tmp_path: Path) -> None:
    """Where the grader's feedback names a mistake on a row with a public check (a hidden row's public example
    included), that check run by a student on the same files (``python -m pytest`` in assignment/) names it too,
    whenever it fails there."""
    from autograder.diagnosis.table import public_tests

    named = {number: re.search(r"^Likely mistake: .*$", str(row.get("output", "")), re.MULTILINE)
             for number, row in rows(graded[entry.name]).items()
             if number in graded[entry.name].get("extra_data", {}).get("diagnosis", {})}
    lines = {ITEMS[number].test: found.group(0) for number, found in named.items()
             if found and ITEMS[number].test in public_tests()}
    if not lines:
        pytest.skip("the grader names no mistake on a row with a public check")
    done = subprocess.run([sys.executable, "-m", "pytest", "checks", "-q", "-p", "no:randomly", "-k", " or ".join(lines)],
                          cwd=ROOT / "assignment", capture_output=True, text=True, timeout=600,
                          env={**os.environ, "AMP_SUBMISSION": str(materialize(entry, tmp_path / "files")),
                               "AMP_LANGUAGE": "en"})
    failures = dict(re.findall(r"^_{3,} (test_\w+)(?:\[.*?\])? _{3,}\n([\s\S]*?)(?=^_{3,} |^=+ short test summary)",
                               done.stdout, re.MULTILINE))
    assert failures or done.returncode == 0, done.stdout[-3000:]
    missing = {test: line for test, line in lines.items() if test in failures and line not in failures[test]}
    assert not missing, f"{entry.name}: failing public checks without the grader's line: {missing}\n{done.stdout[-4000:]}"


#: An explanation that names a call ("Call 2 called scaler.update() 0 time(s)."), and the first difference a Task-2
#: message lists under its heading ("    after call 2: ..."; "    call 2 raised ...").
EXPLAINED_CALL = re.compile(r"^Call (\d+) called ", re.MULTILINE)
FIRST_DIFFERENCE = re.compile(r"the effects differ:\n    (?:after )?call (\d+)\b")


def message_faults(output: str) -> list[str]:
    """What is false or unfinished in a failing row's output: an explanation naming another call than the first that
    differs; a case's line that is a fragment (it starts with a digit: the tail of a sentence) or ends without its outcome
    (no " … " and what came of it; a snippet's "should" without its "but")."""
    found = []
    first = FIRST_DIFFERENCE.search(output)
    for named in EXPLAINED_CALL.finditer(output):
        if first is None or named.group(1) != first.group(1):
            found.append(f"the explanation names call {named.group(1)}, the first difference is in call "
                         f"{first.group(1) if first else '(none listed)'}")
    paragraphs = [p for p in output.split("\n\n") if p.strip()]
    for paragraph in paragraphs[1:]:
        line = paragraph.strip()
        if "\n" in line or not (line.startswith("[") or " … " in line or line[:1].isdigit()):
            continue  # not a case's line: a message's own paragraph
        said = re.sub(r"^\[[^\]]*\] ", "", line)
        if said == "fails the same way":
            continue
        if said[:1].isdigit():  # the tail of a sentence ("3 times on a small MLP, ...": of "We called ... 3 times")
            found.append(f"a case's line is a fragment: {line[:200]!r}")
        elif " … " not in said:
            found.append(f"a case's line has no outcome: {line[:200]!r}")
        elif "the last line should:" in said.rsplit(" … ", 1)[1] and "but with your code" not in said:
            found.append(f"a case's line ends before its outcome: {line[:200]!r}")
    return found


def test_every_failing_rows_message_is_true_for_its_case_and_whole(graded: dict[str, dict[str, Any]]) -> None:
    """For each catalogue bug's failing rows: the call an explanation names is the first call whose effects differ,
    and each further case's line is a whole sentence ending with what came of it."""
    wrong = {f"{entry.name} {number}": said for entry in BUGS for number, row in rows(graded[entry.name]).items()
             if lost(row) and (said := message_faults(str(row.get("output", ""))))}
    assert not wrong, "\n".join(f"{where}: {said}" for where, said in wrong.items())


def test_the_message_check_sees_a_wrong_call_and_a_fragment() -> None:
    """:func:`message_faults` on the two messages the catalogue's bugs got before their fix."""
    explained = ("We called\n    amp_step(...)\n2 times on a small MLP; the gradients of call 2 held an inf.\n"
                 "Compared with a correct amp_step (x), the effects differ:\n    after call 2: the scaler's (scale, "
                 "growth tracker, stage) should be (32768, 0, ready) but is (65536, 1, stepped)\nCall 1 called "
                 "scaler.update() 1 time(s). Call scaler.update() exactly once per call.")
    assert message_faults(explained) == ["the explanation names call 1, the first difference is in call 2"]
    assert message_faults(explained.replace("Call 1 called", "Call 2 called")) == []
    fragment = explained.replace("Call 1 called", "Call 2 called") + (
        "\n\n3 times on a small MLP; the gradients of call 2 held an inf.")
    assert message_faults(fragment) == ["a case's line is a fragment: '3 times on a small MLP; the gradients of call 2 "
                                        "held an inf.'"]
    cut = explained.replace("Call 1 called", "Call 2 called") + (
        "\n\n(The observation before printed 8.5.) … the last line should: print 8.5 0")
    assert message_faults(cut) == ["a case's line ends before its outcome: '(The observation before printed 8.5.) … "
                                   "the last line should: print 8.5 0'"]


def test_every_row_of_tasks_1_and_2_catches_some_bug(graded: dict[str, dict[str, Any]]) -> None:
    """Coverage on the actual verdicts: each Task-1/2 row fails at least one catalogue bug."""
    uncaught = []
    for item in rubric.ITEMS:
        if item.task not in ("scaler", "amp_step"):
            continue
        if not any(lost(rows(graded[entry.name])[item.number]) for entry in BUGS if not entry.known_gap):
            uncaught.append(f"{item.number} {item.test}")
    assert not uncaught, f"rows that no catalogue bug fails: {uncaught}"


@pytest.mark.slow
def test_call_plan_grades_exactly_like_running_every_test(graded: dict[str, dict[str, Any]],
                                                           tmp_path: Path) -> None:
    """The call plan (autograder/engine/plan.py) is only a shortcut. Grading every entry again with it
    switched off (AMP_PLAN=off: every test in pytest, every call live) gives byte-identical results."""
    if REUSED[-1]:
        pytest.skip("grades reused from an earlier run")
    paths = [materialize(entry, tmp_path / "submissions" / entry.folder_name) for entry in ENTRIES]
    proc = grade(paths, tmp_path / "live", timeout=GRADE_TIMEOUT_S, env={"AMP_PLAN": "off"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The comparison means something only if the first run did use the plan, and this one did not.
    used = {entry.name: plan_line(GRADES_FOLDER[-1], entry) for entry in ENTRIES}
    assert all(used.values()), f"graded without the call plan in the first run: {[n for n, u in used.items() if not u]}"
    assert any(int(found.group(1)) > 0 for found in used.values() if found), "the plan passed no test by itself"
    assert not any(plan_line(tmp_path / "live", entry) for entry in ENTRIES), "AMP_PLAN=off still used the plan"
    different, diagnosed = [], 0
    for entry in ENTRIES:
        live = json.loads((tmp_path / "live" / entry.folder_name / "results.json").read_text(encoding="utf-8"))
        planned = json.loads(json.dumps(graded[entry.name]))
        for data in (live, planned):
            data.pop("execution_time", None)
            scenarios = data.pop("extra_data", {}).get("scenarios_run")  # the count differs: that is the point
            assert type(scenarios) is int and scenarios > 0, (entry.name, scenarios)
        # The diagnosis reads the answers the plan's cases collected, so a live run has no "Likely mistake"
        # lines (AMP_PLAN's meaning says so); everything else must be the same byte for byte.
        assert not any(LIKELY_MISTAKE.search(test.get("output", "")) for test in live["tests"]), entry.name
        for test in planned["tests"]:
            test["output"], found = LIKELY_MISTAKE.subn("", test.get("output", ""))
            diagnosed += found
        if live != planned:
            different.append(entry.name)
    assert not different, f"the call plan changed the grades of: {different}"
    assert diagnosed >= len(BUGS) // 2, f"only {diagnosed} 'Likely mistake' lines with the plan"


def plan_line(out: Path, entry: Entry) -> re.Match[str] | None:
    """The call-plan line of ``entry``'s staff.log in ``out`` (None: graded without the plan)."""
    log = out / entry.folder_name / "staff.log"
    return PLAN_LINE.search(log.read_text(encoding="utf-8")) if log.is_file() else None
