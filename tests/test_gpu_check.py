"""``make gpu-check``, the one "dry" parser behind every GPU entry point, and the measurements' arithmetic."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from conftest import ROOT, cuda_works


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


# --------------------------------------------------------------------------- dry or real


@pytest.mark.parametrize("text, dry", [("1", True), ("true", True), ("YES", True), (" on ", True), ("0", False),
                                       ("false", False), ("no", False), ("", False), (None, False), ("off", False)])
def test_one_parser_for_dry(text: str | None, dry: bool) -> None:
    from checks.gpu_mode import parse_dry

    assert parse_dry(text) is dry


def test_an_unknown_dry_value_is_an_error_not_a_guess(monkeypatch: pytest.MonkeyPatch) -> None:
    from autograder.gpu import grading as gpu_grading
    from checks.runners import gpu_runs
    from checks.gpu_mode import parse_dry

    with pytest.raises(ValueError, match="not 'maybe'"):
        parse_dry("maybe")
    for value, dry in (("false", False), ("no", False), ("0", False), ("yes", True)):
        monkeypatch.setenv("AMP_GPU_DRY", value)
        assert gpu_runs.dry_mode() is dry and gpu_grading.resolve_dry(None) is dry
    assert gpu_grading.resolve_dry(False) is False  # --dry 0 wins over AMP_GPU_DRY=yes
    done = run("-m", "autograder", "grade-gpu", "solutions", "--dry", "maybe", "--out", "/nonexistent")
    assert done.returncode == 2 and "dry mode must be one of" in done.stderr


@pytest.mark.parametrize("target", ["grade-gpu", "bench-gpu", "gpu-check"])
def test_make_passes_dry_through_the_parser(target: str) -> None:
    # Under `make test` the parent make's MAKEFLAGS/MAKELEVEL would make this one print "Entering/Leaving
    # directory" lines; the test reads the recipe, so it runs make as a user would, from a clean slate.
    clean_env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}

    def command(*assignments: str) -> str:
        done = subprocess.run(["make", "--no-print-directory", "-n", target, "PY=python", *assignments], cwd=ROOT,
                              capture_output=True, text=True, timeout=60, env=clean_env)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    assert '--dry "0"' in command("DRY=0") and '--dry "false"' in command("DRY=false")
    assert '--dry "1"' in command("DRY=1") and "--dry" not in command()
    if target == "gpu-check":
        assert "--out /tmp/report" in command("OUT=/tmp/report") and "--out out/gpu-check" in command()


@pytest.mark.parametrize("how", [("--dry", "0"), ("--dry", "no")])
def test_dry_0_and_friends_run_the_real_mode(how: tuple[str, ...], tmp_path: Path) -> None:
    """The real mode is the one whose preflight asks CUDA; without CUDA it stops there, with it it passes."""
    done = run("-m", "autograder", "grade-gpu", "solutions", "--preflight-only", *how, "--out", str(tmp_path))
    preflight = json.loads((tmp_path / "gpu_preflight.json").read_text())
    if cuda_works():
        assert done.returncode == 0 and preflight["mode"] == "cuda", done.stderr
    else:
        assert done.returncode == 1 and "CUDA does not work in the sandboxed student process" in done.stderr
        assert not preflight["ok"]


@pytest.mark.skipif(cuda_works(),
                    reason="CUDA is available: the real benchmark would run for minutes (make gpu-check covers it)")
def test_amp_gpu_dry_false_runs_the_real_mode(tmp_path: Path) -> None:
    done = run("benchmarks/gpu_bench.py", "--plot", str(tmp_path / "b.png"), env={"AMP_GPU_DRY": "false"})
    assert done.returncode == 2 and "no CUDA device" in done.stderr and not (tmp_path / "b.png").exists()


# --------------------------------------------------------------------------- make gpu-check


@pytest.mark.skipif(cuda_works(), reason="CUDA is available: gpu-check runs for real there")
def test_gpu_check_without_cuda_says_so_in_one_line_and_succeeds(tmp_path: Path) -> None:
    done = run("-m", "autograder.gpu.check", "--out", str(tmp_path / "report"), "--dry", "0")
    assert done.returncode == 0 and done.stdout.count("\n") == 1 and not done.stderr
    assert done.stdout.startswith("gpu-check: no CUDA device here") and not (tmp_path / "report").exists()


def test_gpu_check_dry_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "check"
    # relative, as `make gpu-check` passes it (out/gpu-check): the tests step runs in assignment/
    done = run("-m", "autograder.gpu.check", "--out", os.path.relpath(out, ROOT), "--dry", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("every step passed")
    report = json.loads((out / "report.json").read_text())
    assert [step["step"] for step in report["steps"]] == ["preflight", "tests", "bench", "grade"]
    assert [(t["test"], t["verdict"]) for t in report["tests"]] == [
        ("test_gpu_amp_reaches_fp32_loss_sooner", "passed"), ("test_gpu_underflow_needs_the_scaler", "passed"),
        ("test_gpu_toy_scaler_matches_cuda_gradscaler", "passed")]
    assert [run["label"] for run in report["bench"]["runs"]] == ["fp32 (TF32 off)", "fp16 + GradScaler", "bf16"]
    assert {row["submission"]: row["gpu_score"] for row in report["gradebook"]} == {"assignment": "0.0",
                                                                                  "solutions": "10.0"}
    markdown = (out / "report.md").read_text()
    for text in ("dry mode on the CPU", f"torch {torch.__version__}", "Preflight: GPU preflight: ok", "| fp16 + GradScaler |",
                 "time to target", "peak memory", "of peak", "Speed-up to float32's loss", "| solutions | 10.0 / 10.0",
                 "| test_gpu_underflow_needs_the_scaler | passed |"):
        assert text in markdown, text
    assert (out / "gpu_bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- what is measured


def test_matmul_flop_count_matches_torchs_flop_counter() -> None:
    """The first layer computes no input gradient: torch's own counter agrees with the formula."""
    from torch.utils.flop_counter import FlopCounterMode

    from checks.runners import gpu_runs as g

    cfg = g.speed_config("cpu", width=64, depth=3, d_out=16, teacher_width=8, batch=32)
    model = g.build_model(cfg)
    inputs, targets = torch.randn(32, 64), torch.randn(32, 16)
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.mse_loss(model(inputs), targets).backward()
    assert _timing().matmul_flops_per_step(cfg) == counter.get_total_flops()


#: The warm-up test's own process: training on a CUDA build of torch asks the driver whether CUDA is there (Adam's
#: step does), which marks every later fork of the asking process as unable to use CUDA, a zygote that a later test
#: of this worker forks included (tests/test_gpu_faults.py); and a fork of this process would compute after its
#: threads (a deadlock). So the check runs in an interpreter of its own.
WARM_UP = """
import importlib.util, json, sys
sys.path[:0] = [{root!r}, {checks!r}]
import torch
from checks.runners import gpu_runs as g
spec = importlib.util.spec_from_file_location("gpu_timing", {timing!r})
timing = importlib.util.module_from_spec(spec)
spec.loader.exec_module(timing)
events, real_train = [], timing.train_once
torch.cuda.empty_cache = lambda: events.append("release")
timing.train_once = lambda *args: events.append("train") or real_train(*args)
cfg = g.speed_config("cpu", steps=6, warmup=1, repeats=2)
report = timing.run_mode(cfg, g.SyntheticTask(cfg), "fp32", None, None)
print(json.dumps({{"events": events, "each": report["time_to_target_each_ms"], "steps": report["steps_to_target"]}}))
"""


def test_no_memory_is_released_between_warm_up_and_the_timed_runs() -> None:
    """The warm-up's blocks stay in the caching allocator: emptying it would time cudaMalloc calls."""
    done = run("-c", WARM_UP.format(root=str(ROOT), checks=str(ROOT / "assignment"),
                                    timing=str(ROOT / "benchmarks" / "gpu_timing.py")))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["events"] == ["train", "train", "train"]  # warm-up, two timed runs, nothing released
    assert len(report["each"]) == 2 and report["steps"] is not None


def _timing() -> Any:
    """``benchmarks/gpu_timing.py``, the benchmark's timed runs (a script's module, loaded from its file)."""
    spec = importlib.util.spec_from_file_location("gpu_timing", ROOT / "benchmarks" / "gpu_timing.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
