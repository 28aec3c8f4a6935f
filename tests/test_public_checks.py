"""The public checks students run: the solution passes all, the skeleton fails each one."""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT


#: Why a public check may skip: the GPU checks need CUDA.  Any other skip hides a check and fails the tests below.
ALLOWED_SKIP = ("CUDA",)


@functools.cache
def collected_public_checks() -> frozenset[str]:
    """The names of every public check case pytest collects in assignment/ (what a student's run holds)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q"], cwd=ROOT / "assignment",
                          env={**os.environ, "AMP_SUBMISSION": str(ROOT / "solutions")}, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    names = frozenset(line.split("::", 1)[1] for line in done.stdout.splitlines() if "::" in line)
    assert len(names) >= 30, done.stdout[-3000:]  # about 45: a collection that lost a module is caught here
    return names


def run_public_checks(submission: Path, tmp_path: Path) -> dict[str, str]:
    """Run `python -m pytest` inside assignment/ against ``submission``; return test id -> failure text.

    Every collected case is accounted for: each one either ran (its failure text, "" when it passed) or skipped
    for a reason in :data:`ALLOWED_SKIP` (the GPU checks without CUDA).  Anything else fails the calling test.
    """
    report = tmp_path / "report.xml"
    report.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "pytest", f"--junitxml={report}"], cwd=ROOT / "assignment",
                   env={**os.environ, "AMP_SUBMISSION": str(submission)}, capture_output=True, text=True, timeout=600)
    cases = list(ET.parse(report).getroot().iter("testcase"))
    skipped = {case.get("name"): case.find("skipped").get("message", "") for case in cases
               if case.find("skipped") is not None}
    hidden = {name: why for name, why in skipped.items() if not any(word in why for word in ALLOWED_SKIP)}
    assert not hidden, f"public checks skipped for another reason than CUDA: {hidden}"
    ran = {case.get("name"): "".join((child.get("message") or "") + (child.text or "")
                                     for child in case if child.tag in ("failure", "error"))
           for case in cases if case.find("skipped") is None}
    assert set(ran) | set(skipped) == collected_public_checks(), "the run and the collection disagree"
    return ran


def test_solution_passes_every_public_check(tmp_path: Path) -> None:
    results = run_public_checks(ROOT / "solutions", tmp_path)
    assert {name: text for name, text in results.items() if text} == {}


def test_skeleton_fails_every_public_check_with_its_not_implemented_message(tmp_path: Path) -> None:
    results = run_public_checks(ROOT / "assignment", tmp_path)
    for name, text in results.items():
        assert "NotImplementedError" in text and "is not implemented yet" in text, name


def test_a_property_failure_shows_a_runnable_minimal_counterexample(tmp_path: Path) -> None:
    buggy = tmp_path / "buggy"
    buggy.mkdir()
    for name in ("amp_step.py", "answers.py"):
        (buggy / name).write_text((ROOT / "solutions" / name).read_text())
    source = (ROOT / "solutions" / "loss_scaler.py").read_text()
    old = "_round_to_float32(self._scale * self._backoff_factor)"
    assert source.count(old) == 1
    (buggy / "loss_scaler.py").write_text(source.replace(old, "_round_to_float32(self._scale / self._backoff_factor)"))
    results = run_public_checks(buggy, tmp_path)
    text = results["test_update_backs_off_after_inf_or_nan"]
    assert "ToyLossScaler(init_scale=" in text and "growth_interval=1)" in text and "scaler.update()" in text
    # The shrunk run is short: one construction, one overflowing step, and it prints what it compared.
    assert text.count("scaler.step(opt0)") == 1
    assert "print(float(scaler.get_scale()), int(scaler.get_growth_tracker()))" in text
    # Only the row of the behaviour it breaks fails (one cause, one deduction), 1.11's public example aside.
    assert {name for name, failure in results.items() if failure} <= {"test_update_backs_off_after_inf_or_nan",
                                                                     "test_matches_torch_gradscaler"}


def _catalogue() -> Any:
    spec = importlib.util.spec_from_file_location("amp_catalogue_public", ROOT / "tests" / "catalogue" / "catalogue.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))  # dataclasses look it up
    if not hasattr(module, "BUGS"):
        spec.loader.exec_module(module)
    return module


#: Catalogue bugs that may pass every public check, with the reason.
NO_PUBLIC_EXAMPLE = {
    "Quick Check answers": "the answer key exists only in the hidden suite",
}


@pytest.mark.slow
def test_every_catalogue_bug_fails_some_public_check(tmp_path: Path) -> None:
    """A student whose public checks pass has met every concept: each catalogued bug fails one of them."""
    catalogue = _catalogue()
    unseen = []
    for entry in catalogue.BUGS:
        if entry.touched == {"answers.py"}:  # NO_PUBLIC_EXAMPLE
            continue
        results = run_public_checks(catalogue.materialize(entry, tmp_path / entry.name), tmp_path)
        if not any(results.values()):
            unseen.append(entry.name)
    assert not unseen, f"bugs that pass every public check: {unseen}"


@pytest.mark.parametrize("name,failing", [
    ("update_called_twice", {"test_amp_step_updates_once_after_step"}),
    # torch's refusal ends every call before update(), so training stops too (the grader's 2.5, 2.6 and 2.10)
    ("step_called_twice", {"test_amp_step_steps_through_scaler", "test_amp_step_updates_once_after_step",
                           "test_underflow_training_converges"})])
def test_a_doubled_scaler_call_fails_the_public_examples_of_the_rows_the_grader_fails(name: str, failing: set[str],
                                                                                      tmp_path: Path) -> None:
    """The public checks refuse a second step or update in one call as the grader does: the call ends there."""
    entry = next(entry for entry in _catalogue().BUGS if entry.name == name)
    results = run_public_checks(_catalogue().materialize(entry, tmp_path / name), tmp_path)
    assert {case for case, failure in results.items() if failure} == failing
    own = {"update_called_twice": "test_amp_step_updates_once_after_step",
           "step_called_twice": "test_amp_step_steps_through_scaler"}[name]  # the row that names the refused call
    assert "torch's scaler refuses the second" in results[own]
