"""One module reads the grader's settings, every setting is in its table, and the test hooks act only when set."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from autograder import ROOT, settings
from checks import words

ENV_NAME = re.compile(r"AMP_[A-Z_]+|AUTOGRADER_ROOT")


def string_constants(folder: Path, skip: tuple[Path, ...] = ()) -> dict[str, set[str]]:
    """Every string constant of the folder's modules that is exactly an environment variable's name -> its files."""
    found: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        if path in skip:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ENV_NAME.fullmatch(node.value):
                found.setdefault(node.value, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_grader_names_its_variables_only_in_the_settings_module() -> None:
    assert string_constants(ROOT / "autograder", skip=(ROOT / "autograder" / "settings.py",)) == {}


def test_every_variable_the_checks_read_is_in_the_table_with_the_module_that_reads_it() -> None:
    """Each is read in one module of the checks (wherever it lives in checks/), the one the table names."""
    read = string_constants(ROOT / "assignment" / "checks")
    modules = {name: sorted(".".join(Path(file).relative_to("assignment").with_suffix("").parts) for file in files)
               for name, files in read.items()}
    assert sorted(modules) == ["AMP_GPU_DRY", "AMP_GPU_MIN_SPEEDUP", "AMP_LANGUAGE", "AMP_STUDENT_DIAGNOSIS",
                               "AMP_SUBMISSION"]
    assert modules == {setting.env: [setting.read_in] for setting in settings.CHECKS_SETTINGS}


def test_every_setting_is_documented_once() -> None:
    names = [setting.env for setting in settings.SETTINGS]
    assert len(names) == len(set(names)) == 20
    assert all(setting.meaning and setting.who and setting.default and setting.read_in for setting in settings.SETTINGS)
    assert {setting.env for setting in settings.GRADE_SETTINGS} == {
        "AMP_HIDDEN_VISIBILITY", "AMP_GPU_POINTS", "AMP_PUBLIC_TESTS", "AMP_HIDDEN_TESTS", "AMP_SANDBOX_LIMITS",
        "AMP_HIDDEN_EXAMPLES", "AMP_TEST_HOOKS"}


def test_unset_settings_give_their_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for setting in settings.SETTINGS:
        monkeypatch.delenv(setting.env, raising=False)
    assert settings.hidden_visibility() == "after_due_date"
    assert settings.gpu_points() == 10.0
    assert settings.public_tests() == ROOT / "assignment" / "checks"
    assert settings.hidden_tests() == ROOT / "autograder" / "hidden"
    assert settings.sandbox_limits() == {}
    assert settings.min_isolation() is None and words.requested() == ""
    assert not settings.plan_off() and not settings.diagnosis_off()
    assert settings.autograder_root() == Path("/autograder")
    assert settings.grade_root() == Path("/grade")


def test_set_settings_are_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AMP_SANDBOX_LIMITS", ' {"call_seconds": 3} ')
    monkeypatch.setenv("AMP_PLAN", "OFF")
    monkeypatch.setenv("AMP_GPU_POINTS", "12.5")
    monkeypatch.setenv("AMP_MIN_ISOLATION", " namespaces ")
    monkeypatch.setenv("AMP_PLAN_CACHE", "/tmp/plans")
    assert settings.sandbox_limits() == {"call_seconds": 3}
    assert settings.plan_off() and settings.gpu_points() == 12.5 and settings.min_isolation() == "namespaces"
    assert settings.plan_cache() == Path("/tmp/plans")
    monkeypatch.setenv("AMP_SANDBOX_LIMITS", "{call_seconds: 3}")
    with pytest.raises(ValueError):
        settings.sandbox_limits()


def test_test_hooks_do_nothing_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AMP_TEST_HOOKS", raising=False)
    assert settings.test_hooks() == {}
    assert settings.die_on() is None and settings.reference_override() is None and settings.phase_log() is None
    monkeypatch.setenv("AMP_TEST_HOOKS", "  ")
    assert settings.test_hooks() == {}


def test_test_hooks_act_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    env = settings.test_hooks_env(reference="/tmp/ref", die_on="alice")
    assert env == {"AMP_TEST_HOOKS": '{"die_on": "alice", "reference": "/tmp/ref"}'}
    monkeypatch.setenv(*env.popitem())
    assert settings.die_on() == "alice" and settings.reference_override() == Path("/tmp/ref")


@pytest.mark.parametrize("value", ['{"die_onn": "alice"}', '["die_on"]', "off"])
def test_a_misspelt_test_hook_is_refused(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AMP_TEST_HOOKS", value)
    with pytest.raises(ValueError):
        settings.test_hooks()
    with pytest.raises(ValueError, match="unknown test hooks"):
        settings.test_hooks_env(die_onn="alice")


def test_a_test_hook_changes_the_grader_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/security.md: the test hooks are part of the grader fingerprint, so a batch regrades when they change."""
    from autograder.batch.run import grader_fingerprint

    switch, value = settings.test_hooks_env(die_on="alice").popitem()
    monkeypatch.delenv(switch, raising=False)
    monkeypatch.delenv("AMP_UNRELATED_SETTING", raising=False)
    default = grader_fingerprint({})
    monkeypatch.setenv("AMP_UNRELATED_SETTING", "1")  # the control: a variable the grader does not read
    assert grader_fingerprint({}) == default
    monkeypatch.setenv(switch, value)
    assert grader_fingerprint({}) != default
