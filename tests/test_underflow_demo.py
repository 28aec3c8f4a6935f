"""Tests for solutions/underflow_demo.py: the numbers the handout promises must hold."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"
DEMO_PATH = SOLUTIONS / "underflow_demo.py"


def _load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_test_underflow_demo", DEMO_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


demo = _load_demo()


@pytest.fixture(scope="module")
def unscaled():
    return demo.run_demo(200, use_scaler=False)


@pytest.fixture(scope="module")
def scaled():
    return demo.run_demo(200, use_scaler=True)


def test_unscaled_gradient_underflows_to_exact_zero_and_stays_there(unscaled) -> None:
    first = unscaled.first_zero_grad_step
    assert first is not None and first <= 60
    assert len(unscaled.zero_grad) == len(unscaled.losses) == 200
    assert all(unscaled.zero_grad[first:])
    assert not any(unscaled.zero_grad[:first])
    # Once the gradient is zero nothing moves: the loss is frozen.
    assert len(set(unscaled.losses[first + 1:])) == 1
    assert unscaled.final_loss > 1e-10
    assert unscaled.final_loss == unscaled.losses[-1]
    assert unscaled.scales == []


def test_scaled_run_keeps_learning(unscaled, scaled) -> None:
    assert scaled.first_zero_grad_step is None
    assert not any(scaled.zero_grad)
    assert scaled.final_loss < 1e-12
    assert scaled.final_loss * 1000 <= unscaled.final_loss
    # Same seed and data: both runs start from the same loss.
    assert scaled.losses[0] == unscaled.losses[0]
    assert scaled.scales[0] == 2.0**16
    assert max(scaled.scales) > 2.0**16  # growth_interval=20: the scale grows


def test_run_demo_is_deterministic(unscaled) -> None:
    again = demo.run_demo(200, use_scaler=False)
    assert again.losses == unscaled.losses
    assert again.first_zero_grad_step == unscaled.first_zero_grad_step


def test_mine_path_matches_torch_gradscaler(scaled) -> None:
    toy = demo._load("loss_scaler").ToyLossScaler
    amp_step = demo._load("amp_step").amp_step
    mine = demo.run_demo(
        200, use_scaler=True, scaler_factory=lambda: toy(growth_interval=20), step_fn=amp_step
    )
    assert mine.scales == scaled.scales
    assert mine.losses == pytest.approx(scaled.losses, rel=1e-6, abs=1e-18)
    assert mine.final_loss < 1e-12


def test_cli_mine_prints_table_and_writes_png(tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "curve.png"
    assert demo.main(["--mine", "--plot", str(png), "--steps", "60"]) == 0
    out = capsys.readouterr().out
    assert "Verdict" in out and "ToyLossScaler" in out
    for step in (0, 10, 25, 33, 50, 59):
        assert any(line.split("|")[0].strip() == str(step) for line in out.splitlines())
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_cli_default_uses_torch_gradscaler(tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "default.png"
    assert demo.main(["--plot", str(png), "--steps", "40"]) == 0
    out = capsys.readouterr().out
    assert "torch.amp.GradScaler" in out
    assert "underflowed to exactly zero at step" in out
    assert png.stat().st_size > 1000


def test_cli_rejects_nonpositive_steps() -> None:
    with pytest.raises(SystemExit):
        demo.main(["--steps", "0"])


def test_mine_reports_unimplemented_stubs(tmp_path, capsys, monkeypatch) -> None:
    (tmp_path / "loss_scaler.py").write_text(
        "class ToyLossScaler:\n    def __init__(self, *args, **kwargs):\n"
        "        raise NotImplementedError\n"
    )
    (tmp_path / "amp_step.py").write_text(
        "def amp_step(*args, **kwargs):\n    raise NotImplementedError\n"
    )
    monkeypatch.setattr(demo, "HERE", tmp_path)
    assert demo.main(["--mine", "--plot", str(tmp_path / "x.png"), "--steps", "5"]) == 1
    assert "Finish Task 1" in capsys.readouterr().out
    assert not (tmp_path / "x.png").exists()


def test_demo_has_no_solution_markers() -> None:
    text = DEMO_PATH.read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "# SOLUTION"):
        assert marker not in text


def test_autocast_cpu_float16_is_available() -> None:
    with torch.autocast("cpu", dtype=torch.float16):
        out = torch.nn.Linear(2, 1)(torch.ones(1, 2))
    assert out.dtype == torch.float16
