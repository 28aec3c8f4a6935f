"""The otter path gives the grader's scores: ``otter run -a otter-autograder.zip`` vs ``python -m autograder grade``.

* ``test_otter_cases_mirror_the_rubric`` / ``test_case_verdicts_reproduce_row_scores``: the
  generated otter test files, loaded as otter's grading kernel loads them but with a stand-in
  judge that returns a given results.json: one case per rubric row with its points and
  visibility, and the cases score exactly the rows' scores (partial credit and the delegation
  delegation included); in a student's notebook, one case per public row.
* ``test_otter_run_matches_the_grader*``: end to end, ``otter run`` without Docker, on the
  bundled examples and a few catalogue entries (partial credit, delegation to torch's scaler);
  ``AMP_OTTER_PARITY=all`` runs every catalogue entry (about 15 s each).

Skipped when otter-grader is not installed (``pip install -e ".[otter]"``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import traceback
import zipfile
from pathlib import Path
from typing import Any

import pytest

otter = pytest.importorskip("otter", reason='otter-grader is not installed: pip install -e ".[otter]"')

from autograder.packaging import otter_build  # noqa: E402
from autograder.engine import rubric
from conftest import EXAMPLES, ROOT, grade, load_results  # noqa: E402

FULL = os.environ.get("AMP_OTTER_PARITY") == "all"
#: Catalogue entries checked by default: 2.1 half lost, 1.5 and part of 1.11 lost, delegation (Task 1 lost).
SAMPLE = ("bug-hardcoded_dtype", "bug-backoff_divides", "bug-delegate_subclass")


CATALOGUE_PATH = ROOT / "tests" / "catalogue" / "catalogue.py"


def _catalogue() -> tuple[Any, str]:
    """(the catalogue module, "") or (None, why it failed to load): a broken catalogue fails the tests that use
    it, never skips them."""
    if not CATALOGUE_PATH.is_file():
        return None, ""
    spec = importlib.util.spec_from_file_location("amp_catalogue_for_otter", CATALOGUE_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - reported by every test that needs the catalogue
        return None, traceback.format_exc(limit=-3)
    return module, ""


CATALOGUE, CATALOGUE_ERROR = _catalogue()
ENTRIES = {e.folder_name: e for e in CATALOGUE.ENTRIES} if CATALOGUE else {}
CHOSEN = sorted(ENTRIES) if FULL else list(SAMPLE)  # a sample entry renamed away fails below, not silently


@pytest.fixture(scope="module")
def rows() -> list[otter_build.Row]:
    return otter_build.rubric_rows()


@pytest.fixture(scope="module")
def otter_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("otter") / "otter-autograder.zip"
    done = subprocess.run([sys.executable, "-m", "autograder.packaging.otter_build", "--out", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return path


@pytest.fixture(scope="module")
def catalogue_reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """The chosen catalogue entries as folders, graded in one ``python -m autograder grade`` run."""
    assert not CATALOGUE_ERROR, f"tests/catalogue/catalogue.py failed to load:\n{CATALOGUE_ERROR}"
    missing = [name for name in CHOSEN if name not in ENTRIES]
    assert not missing, f"sample entries not in the catalogue (renamed? update SAMPLE): {missing}"
    base = tmp_path_factory.mktemp("catalogue")
    folders = [CATALOGUE.materialize(ENTRIES[name], base / "subs" / name) for name in CHOSEN]
    done = grade(folders, base / "out")
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: (folder, load_results(base / "out", name)) for name, folder in zip(CHOSEN, folders)}


def _task_totals(results: dict[str, Any]) -> dict[str, float]:
    by_number = {item.number: item.task for item in rubric.ITEMS}
    totals = {task: 0.0 for task in otter_build.QUESTIONS}
    for row in results["tests"]:
        if row.get("number") in by_number:
            totals[by_number[row["number"]]] += float(row["score"])
    return {otter_build.QUESTIONS[task][0]: round(total, 4) for task, total in totals.items()}


def _otter_run(otter_zip: Path, folder: Path, work: Path) -> dict[str, Any]:
    """What a student uploads (the folder's files at the top level of a zip), graded by ``otter run``.

    A student works in one edition of the notebook and uploads that one: otter refuses a submission with two
    notebooks ("More than one .ipynb file found"), so the Korean edition stays out of an English upload.
    """
    work.mkdir(parents=True)
    upload = work / f"{folder.name}.zip"
    with zipfile.ZipFile(upload, "w") as bundle:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(".ko.ipynb"):
                bundle.write(path, path.relative_to(folder).as_posix())
    command = [sys.executable, "-m", "otter", "run", "-a", str(otter_zip), "-o", str(work), "--no-logo", str(upload)]
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=900, env=otter_build.otter_env())
    assert done.returncode == 0 and (work / "results.json").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((work / "results.json").read_text())


def _compare(got: dict[str, Any], reference: dict[str, Any]) -> None:
    scores = {row["name"]: row.get("score") for row in got["tests"]}
    assert "Autograder Failed" not in scores, got
    otter_totals = {question: float(scores[question]) for question, _ in otter_build.QUESTIONS.values()}
    assert otter_totals == pytest.approx(_task_totals(reference), abs=1e-6)
    assert sum(otter_totals.values()) == pytest.approx(reference["score"], abs=1e-6)


def _fake_results(rows: dict[str, tuple[float, str]], notes: str = "Graded.") -> dict[str, Any]:
    tests = []
    for item in rubric.ITEMS:
        score, message = rows.get(item.number, (item.points, ""))
        tests.append({"number": item.number, "score": score, "max_score": item.points,
                      "status": "passed" if score >= item.points else "failed", "output": message or "Passed."})
    return {"score": sum(t["score"] for t in tests), "tests": tests, "output": notes}


def _load_graded(tests: list[Path], folder: Path, results: dict[str, Any] | None,
                 monkeypatch: pytest.MonkeyPatch, *, bridge: bool = True) -> list[Any]:
    """Load and run the test files as otter's grading kernel does, in ``folder``, with a stand-in judge
    (an ``amp_grader.zip`` whose ``python -m autograder grade`` writes ``results``, or fails if None) and,
    if ``bridge``, the staff's ``amp_otter_bridge.py`` (as otter copies it from the zip's files/)."""
    from otter import Notebook
    from otter.test_files import ExceptionTestFile

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "loss_scaler.py").write_text("# submitted\n")
    if bridge:
        otter_build.write_bridge(folder)
    main = ("import json, os, sys\nfrom pathlib import Path\nout = Path(sys.argv[sys.argv.index('--out') + 1])\n"
            "(out / 'submission').mkdir(parents=True)\n"  # $AMP_LANGUAGE: the language the judge was asked for
            f"text = {json.dumps(json.dumps(results))}.replace('$AMP_LANGUAGE', os.environ.get('AMP_LANGUAGE', ''))\n"
            "(out / 'submission' / 'results.json').write_text(text)\n"
            if results is not None else "import sys\nprint('the judge broke')\nsys.exit(3)\n")
    with zipfile.ZipFile(folder / "amp_grader.zip", "w") as bundle:
        bundle.writestr("autograder/__init__.py", "")
        bundle.writestr("autograder/__main__.py", main)
    monkeypatch.chdir(folder)
    monkeypatch.setattr(Notebook, "_grading_mode", True, raising=False)
    loaded = []
    for path in tests:
        test_file = ExceptionTestFile.from_file(str(path))
        test_file.run({})
        loaded.append(test_file)
    return loaded


def test_otter_cases_mirror_the_rubric(rows: list[otter_build.Row], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from otter.test_files import ExceptionTestFile

    tests = otter_build.write_tests(tmp_path / "tests", rows)
    for test_file in _load_graded(tests, tmp_path / "graded", _fake_results({}), monkeypatch):
        task = next(t for t, (q, _) in otter_build.QUESTIONS.items() if q == test_file.name)
        items = [item for item in rubric.ITEMS if item.task == task]
        assert [tc.name for tc in test_file.test_cases] == [f"{i.number} {i.title}" for i in items]
        assert [tc.points for tc in test_file.test_cases] == [i.points for i in items]
        assert [tc.hidden for tc in test_file.test_cases] == [i.visibility != "visible" for i in items]
        assert test_file.score == test_file.possible == rubric.max_points(tuple(items))
    monkeypatch.setattr("otter.Notebook._grading_mode", False)
    for path in otter_build.write_tests(tmp_path / "public", rows, public_only=True):  # a student's copy
        test_file = ExceptionTestFile.from_file(str(path))
        public = [i for i in rubric.ITEMS if i.suite == rubric.PUBLIC and test_file.name == f"q_{i.task}"]
        assert [tc.name for tc in test_file.test_cases] == [f"{i.number} {i.title}" for i in public]
        assert "True" not in path.read_text().split("AMP_ROWS = [", 1)[1]  # no hidden row in it


SCENARIOS = {
    "all passed": {},
    "1.1 partly lost": {"1.1": (2.8333, "[init_scale=0.0] should raise ValueError")},
    "2.1 half lost": {"2.1": (2.0, "[bfloat16] bf16 went wrong\n\nmore detail")},
    "2.1 all lost": {"2.1": (0.0, "[bfloat16] a\n\n[float16] b")},
    "task 1 lost": {item.number: (0.0, "torch.amp.GradScaler is not available") for item in rubric.ITEMS
                    if item.task == "scaler"},
    "answers": {"3.2": (0.0, "Q2 is wrong."), "3.4": (0.0, "Q4 is unanswered")},
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_case_verdicts_reproduce_row_scores(rows: list[otter_build.Row], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch, scenario: str) -> None:
    results = _fake_results(SCENARIOS[scenario])
    tests = otter_build.write_tests(tmp_path / "tests", rows)
    for test_file in _load_graded(tests, tmp_path / "graded", results, monkeypatch):
        assert test_file.score == pytest.approx(_task_totals(results)[test_file.name], abs=1e-9), test_file.summary()
        assert test_file.possible == pytest.approx(_task_totals(_fake_results({}))[test_file.name], abs=1e-9)
        for tcr in test_file.test_case_results:  # a failing case shows the row's message
            number = tcr.test_case.name.split()[0]
            if not tcr.passed:
                assert SCENARIOS[scenario][number][1] in tcr.message


def test_a_broken_judge_fails_every_row_with_its_reason(rows: list[otter_build.Row], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    tests = otter_build.write_tests(tmp_path / "tests", rows)
    for test_file in _load_graded(tests, tmp_path / "graded", None, monkeypatch):
        assert test_file.score == 0 and test_file.possible > 0
        assert all("the judge broke" in tcr.message for tcr in test_file.test_case_results)


def test_missing_files_are_explained_once_per_question(rows: list[otter_build.Row], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    notes = "About your submission:\n- Missing: loss_scaler.py, amp_step.py, answers.py. The tests that need them score 0."
    results = _fake_results({item.number: (0.0, "file missing") for item in rubric.ITEMS}, notes)
    tests = otter_build.write_tests(tmp_path / "tests", rows)
    for test_file in _load_graded(tests, tmp_path / "graded", results, monkeypatch):
        assert sum("%%writefile" in tcr.message for tcr in test_file.test_case_results) == 1


def test_a_korean_build_speaks_korean(rows: list[otter_build.Row], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Test files built in Korean (the Korean notebook's, ``otter_build --language ko``): the rows' titles, what the
    cases say and the language the judge grades in are the build's, whatever the environment says."""
    from otter import Notebook
    from otter.test_files import ExceptionTestFile

    from checks import words

    assert otter_build.bridge_texts("ko")["setting"] == words.ENV  # the bridge imports nothing from checks/
    assert otter_build.bridge_texts("ko")["submission"] == "AMP_SUBMISSION"  # nor from the settings
    monkeypatch.setenv("AMP_LANGUAGE", "en")
    notes = "제출물에 대한 안내:\n- 없는 파일: answers.py. 이 파일이 필요한 테스트는 0점입니다."
    results = _fake_results({"1.1": (2.8333, "$AMP_LANGUAGE로 채점함"), "1.2": (0.0, "x")}, notes)
    results["tests"][1]["output"] = ""  # a failed row without a message
    tests = otter_build.write_tests(tmp_path / "tests", rows, language="ko")
    scaler = next(f for f in _load_graded(tests, tmp_path / "graded", results, monkeypatch) if f.name == "q_scaler")
    failed = {tcr.test_case.name: tcr.message for tcr in scaler.test_case_results if not tcr.passed}
    assert [tc.name for tc in scaler.test_cases][:3] == [
        "1.1 생성자가 잘못된 인자를 거부함 (통과한 부분: 3점 중 2.8333점)",
        "1.1 생성자가 잘못된 인자를 거부함 (실패한 부분: 3점 중 0.1667점)", "1.2 scale(): float32, 오버플로 없음"]
    first = failed["1.1 생성자가 잘못된 인자를 거부함 (실패한 부분: 3점 중 0.1667점)"]
    assert ("ko로 채점함\n\n제출물에 대한 안내:\n- 없는 파일: answers.py. 이 파일이 필요한 테스트는 0점입니다.\n"
            "노트북에서 작업했다면 노트북의 마지막 셀이 만드는 zip(%%writefile 셀이 쓴 .py 파일이 들어 있음)을 "
            "제출하거나, 그 .py 파일들을 올리세요.") in first  # the judge spoke Korean; the missing file told once
    second = failed["1.2 scale(): float32, 오버플로 없음"]
    assert "실패했습니다." in second and "노트북에서" not in second
    (tmp_path / "graded" / otter_build.BRIDGE_NAME).unlink()
    for test_file in _load_graded(tests, tmp_path / "graded", results, monkeypatch, bridge=False):
        for tcr in test_file.test_case_results:
            assert ("자동 채점기 설정 오류: amp_otter_bridge.py 파일이 없거나 이 테스트를 만들 때의 파일이 아닙니다"
                    "(SHA-256이 다름). 조교에게 알려 주세요.") in tcr.message, tcr.message
    monkeypatch.setattr(Notebook, "_grading_mode", False)  # grader.check in a student's notebook, no checks/ here
    otter_build.write_bridge(tmp_path / "graded", public=True)
    path = otter_build.write_tests(tmp_path / "public", rows, public_only=True, language="ko")[0]
    test_file = ExceptionTestFile.from_file(str(path))
    test_file.run({})
    assert test_file.test_case_results and all(
        f"공개 테스트(과제의 checks/ 폴더)가 이 노트북 옆에 없습니다({tmp_path / 'graded'}). 과제 폴더 안에서 노트북을 "
        "여세요." in tcr.message for tcr in test_file.test_case_results), test_file.test_case_results


def test_test_files_are_small_loaders_of_the_shipped_bridge(rows: list[otter_build.Row], tmp_path: Path) -> None:
    """The bridge's code lives in amp_otter_bridge.py; a test file holds its rows, its edition's digest and a loader:
    the staff's edition (the zip's files/) for the grading test files, the public one for a student's copy."""
    for public_only in (False, True):
        (tmp_path / f"files_{public_only}").mkdir()
        shipped = otter_build.write_bridge(tmp_path / f"files_{public_only}", public_only).read_bytes()
        functions = re.findall(r"^def (\w+)\(", shipped.decode(), re.MULTILINE)
        assert "cases" in functions
        for path in otter_build.write_tests(tmp_path / f"public_{public_only}", rows, public_only=public_only):
            text = path.read_text()
            assert len(re.sub(r"\nAMP_WORDS = \{\n.*?\n\}\n", "\n", text, flags=re.DOTALL).splitlines()) < 100, path  # words aside
            assert not [f for f in functions if f"def {f}(" in text], path
            assert "subprocess" not in text and "zipfile" not in text
            assert f'"{hashlib.sha256(shipped).hexdigest()}"' in text  # the loader accepts exactly that file


def test_nothing_of_the_judge_ships_in_the_students_bridge() -> None:
    """The staff's edition runs the judge from amp_grader.zip; the one next to the student's notebook runs the public
    checks only, and is what assignment/ holds."""
    staff, public = otter_build.bridge_source().decode(), otter_build.bridge_source(public=True).decode()
    assert {"judge_results", "copy_submission", "_judge_cases"} <= set(re.findall(r"^def (\w+)\(", staff, re.M))
    assert "_public_check" in re.findall(r"^def (\w+)\(", public, re.M)
    for judge_only in ("judge_results", "copy_submission", "amp_grader.zip", '"grade"', "zipfile", "shutil"):
        assert judge_only not in public, judge_only
    assert (ROOT / "assignment" / otter_build.BRIDGE_NAME).read_text() == public


#: A bridge module in the folder otter grades in that is not the staff's: never run, every case says why.
FORGED_BRIDGE = b"def cases(rows, grading, texts):\n    return [(f'{r[0]} {r[1]}', r[2], r[3], lambda: None) for r in rows]\n"


@pytest.mark.parametrize("how", ["missing", "changed", "forged for full marks", "a symlink to a copy"])
def test_a_missing_or_changed_bridge_is_never_run(rows: list[otter_build.Row], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    from otter import Notebook
    from otter.test_files import ExceptionTestFile

    folder, ran = tmp_path / "graded", tmp_path / "bridge-ran"
    folder.mkdir()
    payload = f"open({str(ran)!r}, 'w').write('the untrusted bridge ran')\n".encode()
    target, staff = folder / otter_build.BRIDGE_NAME, otter_build.bridge_source()
    if how == "changed":
        target.write_bytes(staff + b"\n" + payload)
    elif how == "forged for full marks":
        target.write_bytes(payload + FORGED_BRIDGE)
    elif how == "a symlink to a copy":
        (tmp_path / "elsewhere.py").write_bytes(staff)
        target.symlink_to(tmp_path / "elsewhere.py")
    tests = otter_build.write_tests(tmp_path / "tests", rows)
    for test_file in _load_graded(tests, folder, _fake_results({}), monkeypatch, bridge=False):  # otter's grading
        assert test_file.score == 0
        assert test_file.possible == pytest.approx(_task_totals(_fake_results({}))[test_file.name], abs=1e-9)
        for tcr in test_file.test_case_results:
            assert "Autograder setup error: amp_otter_bridge.py" in tcr.message, tcr.message
            assert "Please tell the staff." in tcr.message and "Traceback" not in tcr.message
    monkeypatch.setattr(Notebook, "_grading_mode", False)  # grader.check in a student's notebook
    for path in otter_build.write_tests(tmp_path / "public", rows, public_only=True):
        test_file = ExceptionTestFile.from_file(str(path))
        test_file.run({})
        public = [i for i in rubric.ITEMS if i.suite == rubric.PUBLIC and test_file.name == f"q_{i.task}"]
        assert len(test_file.test_case_results) == len(public)
        for tcr in test_file.test_case_results:
            assert not tcr.passed and "download amp_otter_bridge.py again" in tcr.message, tcr.message
    assert not ran.exists()


def test_a_bridge_with_windows_line_ends_still_loads(rows: list[otter_build.Row], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout that turned the bridge's line ends into CRLF is still the staff's bridge."""
    folder = tmp_path / "graded"
    folder.mkdir()
    (folder / otter_build.BRIDGE_NAME).write_bytes(otter_build.bridge_source().replace(b"\n", b"\r\n"))
    results = _fake_results(SCENARIOS["2.1 half lost"])
    tests = otter_build.write_tests(tmp_path / "tests", rows)
    for test_file in _load_graded(tests, folder, results, monkeypatch, bridge=False):
        assert test_file.score == pytest.approx(_task_totals(results)[test_file.name], abs=1e-9)


def test_a_submitted_bridge_is_replaced_by_the_staff_one(rows: list[otter_build.Row], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Otter's own order: the submission lands in submission/, then its runner's ``prepare_files`` copies the
    zip's files/ over it, then the plugin moves what was submitted aside: the staff's bridge is what loads,
    and the judge's copy of the submission leaves it out."""
    from otter.run.run_autograder.runners import create_runner

    from autograder.packaging import otter_bridge
    from autograder.packaging.otter_plugin import QUARANTINE, quarantine

    autograder_dir, staff = tmp_path / "autograder", otter_build.bridge_source()
    otter_build.write_tests(autograder_dir / "source" / "tests", rows)
    (autograder_dir / "source" / "files").mkdir()
    otter_build.write_bridge(autograder_dir / "source" / "files")
    submission = autograder_dir / "submission"
    submission.mkdir()
    (submission / otter_build.BRIDGE_NAME).write_bytes(FORGED_BRIDGE)
    monkeypatch.chdir(autograder_dir)
    create_runner({}, autograder_dir=str(autograder_dir)).prepare_files()
    assert (submission / otter_build.BRIDGE_NAME).read_bytes() == staff
    quarantine(submission)
    assert (submission / otter_build.BRIDGE_NAME).read_bytes() == staff
    assert not (submission / QUARANTINE / otter_build.BRIDGE_NAME).exists()

    results = _fake_results(SCENARIOS["2.1 half lost"])
    tests = sorted((submission / "tests").glob("q_*.py"))
    for test_file in _load_graded(tests, submission, results, monkeypatch, bridge=False):
        assert test_file.score == pytest.approx(_task_totals(results)[test_file.name], abs=1e-9)
    otter_bridge.copy_submission(submission, tmp_path / "judged")  # the copy made when nothing was quarantined
    assert sorted(p.name for p in (tmp_path / "judged").iterdir()) == ["loss_scaler.py"]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXAMPLES))
def test_otter_run_matches_the_grader_on_the_examples(name: str, otter_zip: Path, tmp_path: Path,
                                                       graded_examples: dict[str, dict[str, Any]]) -> None:
    _compare(_otter_run(otter_zip, EXAMPLES[name], tmp_path / "run"), graded_examples[name])


@pytest.mark.slow
@pytest.mark.skipif(not CATALOGUE_PATH.is_file(), reason="the buggy-submission catalogue (tests/catalogue) is not there")
@pytest.mark.parametrize("name", CHOSEN)
def test_otter_run_matches_the_grader(name: str, otter_zip: Path, tmp_path: Path,
                                      catalogue_reference: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    folder, reference = catalogue_reference[name]
    _compare(_otter_run(otter_zip, folder, tmp_path / "run"), reference)


@pytest.mark.slow
def test_submitted_modules_cannot_reach_otters_kernel(otter_zip: Path, tmp_path: Path,
                                                      graded_examples: dict[str, dict[str, Any]]) -> None:
    """Otter's kernel runs in the submission folder: a submitted otter.py / json.py / .OTTER_LOG would be
    imported or unpickled by otter itself; the quarantine plugin moves them out of its way first.  A submitted
    amp_otter_bridge.py is overwritten by the zip's own before anything loads it."""
    folder = tmp_path / "hostile"
    shutil.copytree(EXAMPLES["solutions"], folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("otter.py", "json.py", "pickle.py", otter_build.BRIDGE_NAME):
        (folder / name).write_text('raise SystemExit("a submitted module ran in otter\'s kernel")\n')
    (folder / ".OTTER_LOG").write_bytes(b"not a pickle")
    (folder / "amp_homework.ipynb").write_text("{}")  # replaced by the stand-in, never executed
    _compare(_otter_run(otter_zip, folder, tmp_path / "run"), graded_examples["solutions"])


def test_quarantine_moves_what_was_submitted(tmp_path: Path) -> None:
    from autograder.packaging import otter_bridge
    from autograder.packaging.otter_plugin import KEEP, QUARANTINE, quarantine

    assert KEEP == set(otter_bridge.ADDED)  # what the plugin keeps in place, the bridge leaves out of the copy
    for name in ("tests", "sub"):
        (tmp_path / name).mkdir()
    for name in ("amp_grader.zip", "amp_homework.ipynb", "amp_otter_bridge.py", "__init__.py", "loss_scaler.py",
                 "otter.py", ".OTTER_LOG", "sub/amp_step.py"):
        (tmp_path / name).write_text("" if name == "__init__.py" else "x")
    assert quarantine(tmp_path) == [".OTTER_LOG", "loss_scaler.py", "otter.py", "sub"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["tests", "amp_grader.zip", "amp_homework.ipynb", "amp_otter_bridge.py", "__init__.py", QUARANTINE])
    assert (tmp_path / QUARANTINE / "sub" / "amp_step.py").is_file()


def test_the_zip_holds_the_grader_and_the_stand_in(otter_zip: Path) -> None:
    """Otter executes the stand-in notebook (one markdown cell), never submitted code; CPU torch; no solutions."""
    with zipfile.ZipFile(otter_zip) as bundle:
        names = set(bundle.namelist())
        driver = json.loads(bundle.read(f"files/{otter_build.DRIVER_NAME}"))
        shipped_bridge = bundle.read(f"files/{otter_build.BRIDGE_NAME}")
        env = bundle.read("environment.yml").decode()
        with zipfile.ZipFile(bundle.open(f"files/{otter_build.GRADER_ZIP_NAME}")) as grader:
            inside = grader.namelist()
    assert {f"tests/{q}.py" for q, _ in otter_build.QUESTIONS.values()} <= names
    assert f"files/{otter_build.BRIDGE_NAME}" in names
    assert [c["cell_type"] for c in driver["cells"]] == ["markdown"]
    assert "torch==2.13.0+cpu" in env and "download.pytorch.org/whl/cpu" in env
    assert "autograder/hidden/test_hidden_scaler.py" in inside and "checks/runners/harness.py" in inside
    assert not any(n.startswith("solutions/") or n.rsplit("/", 1)[-1] in ("loss_scaler.py", "amp_step.py", "answers.py")
                   for n in inside)
    assert shipped_bridge == otter_build.bridge_source()  # the module the test files' digest names


@pytest.mark.slow
def test_a_forgery_earns_on_otter_what_it_earns_on_the_cli(otter_zip: Path, tmp_path: Path) -> None:
    """A harness-patching forgery of tests/attacks.py (in answers.py, which is only parsed) through ``otter run``."""
    import attacks

    folder = tmp_path / "answers_harness_patched"
    folder.mkdir()
    files = {**attacks.SKELETON, "answers.py": attacks.appended(attacks.ANSWERS, attacks.HARNESS_PATCHED)}
    for filename, text in files.items():
        (folder / filename).write_text(text)
    reference = grade([folder], tmp_path / "cli")
    assert reference.returncode == 0, reference.stderr[-2000:]
    expected = load_results(tmp_path / "cli", folder.name)
    assert expected["score"] == attacks.SKELETON_WITH_ANSWERS
    _compare(_otter_run(otter_zip, folder, tmp_path / "run"), expected)
