"""Regeneration in proportion: ``make student`` rebuilds a diagnosis table only when its inputs' behaviour changed,
and says which built artefacts in ``dist/`` are now stale.

* The tables' fingerprint (:func:`autograder.diagnosis.table.source_fingerprint`, also grading's "the table is
  older than the code") hashes behaviour: a docstring or a comment does not count, code does, and so does the
  text of a ``@given`` test, whose docstring seeds hypothesis's examples.
* Each packaging command records what its artefact was built from (:mod:`autograder.packaging.built`);
  ``python -m autograder.packaging.student`` names the artefacts whose sources changed since.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.diagnosis import table
from autograder.engine import fingerprint
from autograder.packaging import built, student, tables
from conftest import EXAMPLES, ROOT

CHECK = '''"""Public checks (module docstring)."""

# a comment
def test_scale(student):
    """What the row checks."""
    return student.run("scaler_ops", {"ops": [1, 2]})  # why


def stub():
    """Only a docstring."""
'''
#: The check above as its fingerprint reads it: no docstring, no comment, an empty body is ``pass``.
CHECK_BEHAVIOUR = '''def test_scale(student):
    return student.run('scaler_ops', {'ops': [1, 2]})

def stub():
    pass'''


def test_the_behaviour_of_a_check_leaves_out_docstrings_and_comments(tmp_path: Path) -> None:
    path = tmp_path / "test_public_x.py"
    path.write_text(CHECK, encoding="utf-8")
    assert fingerprint.behaviour_text(path).decode() == CHECK_BEHAVIOUR
    (tmp_path / "notes.ini").write_text("[x]\na = 1 ; kept\n", encoding="utf-8")
    assert fingerprint.behaviour_text(tmp_path / "notes.ini") == b"[x]\na = 1 ; kept\n"  # not Python: its bytes
    (tmp_path / "broken.py").write_text("def (:\n", encoding="utf-8")
    assert fingerprint.behaviour_text(tmp_path / "broken.py") == b"def (:\n"
    assert fingerprint.behaviour_text(tmp_path / "absent.py") == b"missing"


@pytest.fixture
def one_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The public checks' Task-1 file, alone in a copy of the tree the tables' fingerprint reads."""
    path = tmp_path / "assignment" / "checks" / "test_public_scaler.py"
    path.parent.mkdir(parents=True)
    path.write_text((ROOT / "assignment" / "checks" / "test_public_scaler.py").read_text(encoding="utf-8"))
    monkeypatch.setattr(table, "ROOT", tmp_path)
    monkeypatch.setattr(table, "source_files", lambda: [path])
    monkeypatch.setattr(table, "grader_source_files", lambda: [path])
    return path


def _edited(path: Path, old: str, new: str) -> str:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")
    return table.source_fingerprint()


def test_the_grader_table_follows_the_example_counts(one_check: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The examples a hidden property test explores choose the grader's table's answers, not the students'."""
    from autograder.engine import examples

    public, grader = table.source_fingerprint(), table.source_fingerprint(public=False)
    monkeypatch.setitem(examples.COUNTS, "test_update_rule_properties", 50)
    assert table.source_fingerprint() == public and table.source_fingerprint(public=False) != grader


def test_a_docstring_edit_keeps_the_tables_fingerprint_and_a_behaviour_change_does_not(one_check: Path) -> None:
    before = table.source_fingerprint()
    assert table.source_fingerprint(public=False) != before  # the grader's: the example counts too (below)
    module_doc = _edited(one_check, '"""Public checks for Task 1', '"""Public checks (reworded) for Task 1')
    comment = _edited(one_check, "    sizes = [2, 3, 1]\n", "    sizes = [2, 3, 1]  # three parameters\n")
    layout = _edited(one_check, "    sizes = [2, 3, 1]", "    sizes = [2,\n             3, 1]")
    assert module_doc == comment == before
    # layout inside a @given test is in hypothesis's seed (only comments and blank lines are not): it counts
    assert layout != before
    behaviour = _edited(one_check, "{\"init_scale\": 2.0**16}", "{\"init_scale\": 2.0**15}")
    assert behaviour not in (before, layout)
    plain_doc = _edited(one_check, "kwargs: dict[str, Any]) -> None:\n    args =",
                        'kwargs: dict[str, Any]) -> None:\n    """Reworded."""\n    args =')
    assert plain_doc == behaviour  # a parametrized test's docstring: not behaviour
    given_doc = _edited(one_check, "data: st.DataObject) -> None:\n    sizes",
                        'data: st.DataObject) -> None:\n    """Seeds the examples."""\n    sizes')
    assert given_doc != behaviour  # a @given test's docstring seeds hypothesis's examples: behaviour


def test_rewording_a_mistake_marks_no_table_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A catalogued mistake's words (checks/words.py MISTAKES, in any language) are looked up when a line is
    rendered: no table holds them, so neither diagnosis table nor the recorded Task-2 effects go stale; a message a
    student process says is in its answers, so rewording one does."""
    import autograder
    from autograder.packaging import amp_effects

    path = tmp_path / "assignment" / "checks" / "words.py"
    path.parent.mkdir(parents=True)
    path.write_text((ROOT / "assignment" / "checks" / "words.py").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(table, "ROOT", tmp_path)
    monkeypatch.setattr(autograder, "ROOT", tmp_path)  # amp_effects reads it when it fingerprints
    monkeypatch.setattr(table, "source_files", lambda: [path])
    monkeypatch.setattr(table, "grader_source_files", lambda: [path])
    monkeypatch.setattr(amp_effects, "source_files", lambda: [path])

    def fingerprints() -> tuple[str, str, str]:
        return table.source_fingerprint(), table.source_fingerprint(public=False), amp_effects.source_fingerprint()

    before = fingerprints()
    _edited(path, '"backoff_divides": "the scale is divided by backoff_factor instead of multiplied by it",',
            '"backoff_divides": "the scale is divided by backoff_factor (reworded)",')
    _edited(path, '"backoff_divides": "스케일에 backoff_factor를 곱하지 않고 나눌",', '"backoff_divides": "나눌",')
    _edited(path, '"ko": {\n', '"ko": {\n        "a_new_bug": "새 실수",\n')  # a new bug's words
    assert fingerprints() == before
    _edited(path, '"file.missing": "{file} is missing:', '"file.missing": "{file} is absent:')
    assert all(now != then for now, then in zip(fingerprints(), before))


def test_only_the_line_reads_the_mistakes_words() -> None:
    """Leaving ``MISTAKES`` out of the fingerprint is sound while no answer is made from it: in the checks, only
    ``words.mistake`` reads it and only the diagnosis line (``judge/diagnose.py``) calls that."""
    import re

    checks = ROOT / "assignment" / "checks"
    readers = {path.relative_to(checks).as_posix() for path in checks.rglob("*.py")
               if re.search(r"\bMISTAKES\b|\bmistake\(", path.read_text(encoding="utf-8"))}
    assert readers == {"words.py", "judge/diagnose.py"}


def test_a_given_tests_docstring_counts_and_a_plain_tests_does_not(tmp_path: Path) -> None:
    plain = 'def test_a(student):\n    """Doc."""\n    return 1\n'
    given = '@given(x=st.integers())\ndef test_b(student, x):\n    """Doc."""\n    return x  # note\n'
    path = tmp_path / "test_x.py"
    found = {}
    for name, text in {"plain": plain, "plain reworded": plain.replace("Doc.", "Other."),
                       "given": given, "given commented": given.replace("# note", "# other note"),
                       "given reworded": given.replace("Doc.", "Other.")}.items():
        path.write_text(text, encoding="utf-8")
        found[name] = fingerprint.behaviour_digest([path], {})
    assert found["plain"] == found["plain reworded"]
    assert found["given"] == found["given commented"]  # hypothesis drops comments from its seed too
    assert found["given"] != found["given reworded"]


def test_the_given_keys_are_hypothesis_own() -> None:
    """What the fingerprint keeps of each ``@given`` test is the text hypothesis seeds its examples from."""
    from hypothesis.internal.reflection import _clean_source

    spec = importlib.util.spec_from_file_location("hidden_scaler_keys", ROOT / "autograder" / "hidden" / "test_hidden_scaler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    given = [f for _, f in inspect.getmembers(module, inspect.isfunction)
             if getattr(f, "hypothesis", None) is not None and f.__module__ == module.__name__]
    assert len(given) >= 5
    for function in given:
        block = inspect.getsource(function)
        assert fingerprint.hypothesis_source(block) == _clean_source(block).decode(), function.__name__


def test_grading_and_the_release_judge_a_table_by_the_same_fingerprint(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A table whose ``source`` is the fingerprint is current for make student and for grading alike."""
    from autograder import settings

    stored = json.loads(table.SHIPPED.read_text(encoding="utf-8"))
    copy = tmp_path / "diagnosis.json"
    for source, current in ((table.source_fingerprint(public=False), True), ("built from other code", False)):
        copy.write_text(json.dumps({**stored, "source": source}), encoding="utf-8")
        assert tables.table_is_current(copy, public=False) is current
        monkeypatch.setattr(table, "SHIPPED", copy)
        monkeypatch.setenv(settings.DIAGNOSIS.env, "")
        table._LOADED.clear()
        assert table.state().stale is not current
    table._LOADED.clear()


# --------------------------------------------------------------------------- dist/ artefacts


def _fake_dist(dist: Path) -> None:
    """A Gradescope zip built from other sources, a Classroom folder built from these, an otter zip with no record
    and older than every source, and a PrairieLearn folder with no record, newer than every source."""
    dist.mkdir()
    (dist / "autograder.zip").write_bytes(b"PK")
    (dist / "autograder.zip.built.json").write_text(json.dumps({
        "artefact": "autograder.zip", "built": "2026-01-05 09:30 UTC", "rebuild": "make autograder AMP_LANGUAGE=ko",
        "sources": {**built.digests(), "assignment/": "0" * 64}}), encoding="utf-8")
    (dist / "classroom").mkdir()
    (dist / "classroom" / "README.md").write_text("template\n")
    built.record(dist / "classroom", "make classroom")
    (dist / "otter-autograder.zip").write_bytes(b"PK")
    os.utime(dist / "otter-autograder.zip", (1.0e9, 1.0e9))  # 2001
    (dist / "prairielearn").mkdir()
    (dist / "prairielearn" / "info.json").write_text("{}")
    os.utime(dist / "prairielearn" / "info.json", (4.0e9, 4.0e9))  # 2096


def test_make_student_names_the_stale_artefacts_and_how_to_rebuild_them(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _fake_dist(dist)
    done = subprocess.run([sys.executable, "-m", "autograder.packaging.student", "--dry-run", "--dist", str(dist)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    stale = [line.strip() for line in done.stdout.splitlines() if line.startswith("  stale ")]
    assert len(stale) == 2, done.stdout
    assert stale[0] == (f"stale    {dist}/autograder.zip is older than assignment/ (built 2026-01-05 09:30 UTC): "
                        "run make autograder AMP_LANGUAGE=ko")
    assert stale[1].startswith(f"stale    {dist}/otter-autograder.zip is older than ")  # the newest source file
    assert stale[1].endswith(" (by modification time: it has no .built.json record): run make otter")
    assert "2 artefact(s) in dist/ now stale" in done.stdout


def test_an_artefact_goes_stale_when_a_source_part_changes(tmp_path: Path) -> None:
    for part in ("assignment", "autograder", "solutions"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "x.py").write_text("x = 1\n")
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    zip_path = tmp_path / "dist" / "autograder.zip"
    zip_path.parent.mkdir()
    zip_path.write_bytes(b"PK")
    built.record(zip_path, "make autograder", root=tmp_path)
    assert built.stale(root=tmp_path) == []
    (tmp_path / "solutions" / "x.py").write_text('"""A docstring is what students read: it counts here."""\nx = 1\n')
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    [found] = built.stale(root=tmp_path)
    assert found.line.startswith("dist/autograder.zip is older than solutions/ and pyproject.toml (built ")
    assert found.line.endswith("): run make autograder")


def test_a_packaging_command_records_how_to_rebuild_its_artefact(tmp_path: Path) -> None:
    assert built.rebuild_command(ROOT / "dist" / "classroom", "classroom", "autograder.packaging.classroom",
                                 [], AMP_LANGUAGE="ko") == "make classroom AMP_LANGUAGE=ko"
    assert built.rebuild_command(ROOT / "dist" / "prairielearn", "prairielearn", "autograder.packaging.prairielearn",
                                 [], PL_IMAGE="me/grader:1", AMP_LANGUAGE="") == "make prairielearn PL_IMAGE=me/grader:1"
    out = tmp_path / "gs.zip"
    assert built.rebuild_command(out, "autograder", "autograder.packaging.gradescope", ["--out", str(out)]) \
        == f"python -m autograder.packaging.gradescope --out {out}"


# --------------------------------------------------------------------------- the make targets


def _make_n(target: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    done = subprocess.run(["make", "--no-print-directory", "-n", "-W", "pyproject.toml", target, "PY=python"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, env=clean)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_student_says_when_it_installs_otter() -> None:
    commands = _make_n("student")
    install = commands.index('pip install --quiet --disable-pip-version-check -e ".[otter]"')
    said = commands.index("installing the [otter] extra")
    assert said < install
    assert "python -m autograder.packaging.student" in commands


def test_make_golden_rewrites_the_golden_feedback_as_the_tests_grade() -> None:
    commands = _make_n("golden")
    assert "AMP_DIAGNOSIS=off AMP_LANGUAGE=en python -m autograder grade solutions assignment examples/partially_correct " \
           "--out out/golden" in commands
    names = sorted(path.name[:-len(".feedback.md")] for path in (ROOT / "tests" / "golden" / "en").glob("*.feedback.md"))
    assert names == sorted(EXAMPLES)
    assert "for name in solutions assignment partially_correct; do cp out/golden/$name/feedback.md " \
           "tests/golden/en/$name.feedback.md; done" in commands


def test_without_otter_the_notebooks_are_left_with_the_command_that_installs_it(monkeypatch: pytest.MonkeyPatch,
                                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m autograder.packaging.student`` installs nothing: it says what is missing and how to get it."""
    from autograder.packaging import release

    monkeypatch.setattr(release, "write_release", lambda *_: None)
    monkeypatch.setattr(student, "refresh_effects", lambda *_, **__: None)
    monkeypatch.setattr(student.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(subprocess, "run", lambda *_, **__: pytest.fail("nothing may be run or installed"))
    assert student.main(["--tables", "never", "--dist", "/nonexistent"]) == 1
    said = capsys.readouterr().out
    assert ("  FAILED   the notebooks: otter assign needs otter-grader, not installed here: run make setup-otter   "
            "(or: .venv/bin/python -m pip install -e '.[otter]')") in said.splitlines()
