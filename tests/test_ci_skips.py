"""tests/conftest.py's skip_unless_ci: a test that needs what this machine lacks skips here and fails in CI."""

from __future__ import annotations

import pytest

from conftest import in_ci, skip_unless_ci


@pytest.mark.parametrize("value, ci", [("true", True), ("1", True), ("yes", True), ("TRUE", True),
                                       ("", False), ("0", False), ("false", False), ("False", False)])
def test_ci_is_told_by_the_ci_variable(value: str, ci: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", value)
    assert in_ci() is ci


def test_outside_ci_a_missing_requirement_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs root"):
        skip_unless_ci("needs root")


def test_in_ci_a_missing_requirement_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="needs root: CI must run this test"):
        skip_unless_ci("needs root")
