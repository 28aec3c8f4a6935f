"""solutions/ is the single source of assignment/: the skeleton is generated and in sync."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from autograder.diagnosis.table import RELEASED_TABLE, Table, hidden_data, source_fingerprint
from autograder.packaging.release import release_files, strip_solution
from conftest import ROOT


def test_assignment_is_in_sync_with_solutions() -> None:
    for name, text in release_files(ROOT / "solutions").items():
        current = (ROOT / "assignment" / name).read_text(encoding="utf-8")
        assert current == text, f"assignment/{name} is stale: run `make student` and commit the result"


def test_the_students_diagnosis_table_is_current_and_public() -> None:
    """The committed checks/diagnosis.json was built from this code (by fingerprint: a rebuild takes minutes)."""
    assert RELEASED_TABLE.is_file(), "assignment/checks/diagnosis.json is missing: run `make student` and commit it"
    table = Table.from_json(RELEASED_TABLE.read_text(encoding="utf-8"))
    assert table.source == source_fingerprint(), \
        "assignment/checks/diagnosis.json is stale: run `make student` and commit the result"
    assert hidden_data(table) == []  # it ships to every student: public checks' cases only
    assert table.cases and table.rows and all(case.calls for case in table.cases.values())


def test_skeleton_keeps_signatures_and_docstrings_but_no_solution() -> None:
    skeleton = (ROOT / "assignment" / "loss_scaler.py").read_text()
    assert "def unscale_(self, optimizer: torch.optim.Optimizer) -> None:" in skeleton
    assert "Divide ``optimizer``'s gradients by the scale" in skeleton
    assert "BEGIN SOLUTION" not in skeleton and "_round_to_float32(self._scale * self._backoff_factor)" not in skeleton
    assert (ROOT / "assignment" / "answers.py").read_text().count("= ...") == 5


def test_markers_are_validated() -> None:
    with pytest.raises(ValueError, match="without"):
        strip_solution("def f():\n    # BEGIN SOLUTION\n    return 1\n", "loss_scaler.py")
    with pytest.raises(ValueError, match="without"):
        strip_solution("def f():\n    pass\n    # END SOLUTION\n", "loss_scaler.py")
    with pytest.raises(ValueError, match="no task owns"):
        strip_solution("def f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n", "x.py")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(f"skeleton_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_skeleton_part_raises_a_helpful_not_implemented_error() -> None:
    scaler = _load(ROOT / "assignment" / "loss_scaler.py", "loss_scaler")
    with pytest.raises(NotImplementedError, match=r"ToyLossScaler.__init__ is not implemented yet: see Task 1"):
        scaler.ToyLossScaler()
    instance = object.__new__(scaler.ToyLossScaler)
    for method, args in [("scale", (torch.ones(()),)), ("unscale_", (None,)), ("step", (None,)), ("update", ()),
                         ("get_scale", ()), ("get_growth_tracker", ()), ("state_dict", ()), ("load_state_dict", ({},))]:
        with pytest.raises(NotImplementedError, match=f"ToyLossScaler.{method} is not implemented yet"):
            getattr(instance, method)(*args)
    amp = _load(ROOT / "assignment" / "amp_step.py", "amp_step")
    with pytest.raises(NotImplementedError, match="amp_step is not implemented yet: see Task 2"):
        amp.amp_step(None, None, None, None, None, None)


def test_make_student_regenerates_everything_built_from_the_solution(monkeypatch: pytest.MonkeyPatch) -> None:
    """One command after editing solutions/: the skeleton, the effects, both notebooks and, when their inputs
    changed, both diagnosis tables (tests/test_regenerate.py: when they are left)."""
    import subprocess
    import sys as system

    from autograder.packaging import amp_effects, release, student, tables

    ran: list[list[str]] = []
    monkeypatch.setattr(subprocess, "run", lambda command, **_: ran.append(command) or subprocess.CompletedProcess(command, 0, "wrote x", ""))
    monkeypatch.setattr(release, "write_release", lambda *_: ran.append(["skeleton"]))
    monkeypatch.setattr(amp_effects, "write", lambda path: ran.append(["effects", path.name]))
    monkeypatch.setattr(amp_effects, "is_current", lambda path: False)
    monkeypatch.setattr(student.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(tables, "table_is_current", lambda path, public: False)
    assert student.main(["--dist", "/nonexistent"]) == 0
    python = system.executable
    assert ran == [["skeleton"], ["effects", "amp_effects.json"],
                   [python, "-m", "autograder.packaging.notebook_build", "--language", "en"],
                   [python, "-m", "autograder.packaging.notebook_build", "--language", "ko"],
                   [python, "-m", "autograder.diagnosis", "build", "--quiet", "--out", str(RELEASED_TABLE), "--public"],
                   [python, "-m", "autograder.diagnosis", "build", "--quiet", "--out",
                    str(ROOT / "autograder" / "hidden" / "diagnosis.json")]]


def test_the_release_records_the_task2_effects_the_public_checks_read(tmp_path: Path) -> None:
    """``make student`` (release.py) writes checks/amp_effects.json beside the skeleton (tests/test_amp_effects.py
    holds its content to the grader's judge)."""
    from autograder.packaging import release

    assert release.main(["--out", str(tmp_path), "--no-diagnosis"]) == 0
    written = json.loads((tmp_path / "checks" / "amp_effects.json").read_text())
    assert written["format"] == 1 and len(written["cases"]) == 10
