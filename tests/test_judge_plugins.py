"""A pytest plugin that the grading machine happens to hold changes no grade: the judge's pytest loads only the
plugins it names (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``, then ``-p``), so pytest-randomly or a plugin with hooks of its
own cannot reorder, reseed or rewrite the hidden tests."""

from __future__ import annotations

from pathlib import Path

from conftest import EXAMPLES, grade, load_results

#: Installed through an entry point, as pip would: every test it sees passes.
PLUGIN = '''
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    outcome = yield
    outcome.force_result(None)
'''


def test_an_installed_pytest_plugin_changes_no_grade(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "everything_passes-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "everything_passes.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: everything-passes\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\neverything_passes = everything_passes\n")
    done = grade([EXAMPLES["partially_correct"]], tmp_path / "out", env={"PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert load_results(tmp_path / "out", "partially_correct")["score"] == 70.0  # as without the plugin


def test_pytest_options_and_plugins_from_the_environment_change_no_grade(tmp_path: Path) -> None:
    """``PYTEST_ADDOPTS`` and ``PYTEST_PLUGINS`` (read by pytest whatever the autoload switch) are the caller's,
    not the judge's: ``-x`` would stop the suite at the first failing case, the plugin would pass every test."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "everything_passes.py").write_text(PLUGIN)
    env = {"PYTHONPATH": str(site), "PYTEST_ADDOPTS": "-x", "PYTEST_PLUGINS": "everything_passes"}
    done = grade([EXAMPLES["partially_correct"]], tmp_path / "out", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert load_results(tmp_path / "out", "partially_correct")["score"] == 70.0  # as without them
