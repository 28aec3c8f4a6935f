"""The GPU part in dry mode (CPU): the real grader path, the benchmark and the gradebook merge.

The GPU checks (assignment/checks/test_gpu.py) run here exactly as staff run them on a
GPU, through ``python -m autograder grade-gpu --dry``: same sandboxed student process,
same scenarios, CPU autocast instead of CUDA and no speed assertion.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from conftest import ROOT, cuda_works

GPU_TESTS = ("4.1 test_gpu_amp_reaches_fp32_loss_sooner", "4.2 test_gpu_underflow_needs_the_scaler",
             "4.3 test_gpu_toy_scaler_matches_cuda_gradscaler")


def run(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


def read_csv(path: Path) -> dict[str, dict[str, str]]:
    with path.open(newline="") as stream:
        return {row["submission"]: row for row in csv.DictReader(stream)}


def solution_with(folder: Path, line: str, replacement: str) -> Path:
    """The solution with the one line ``line`` of amp_step.py replaced."""
    folder.mkdir()
    for name in ("loss_scaler.py", "amp_step.py", "answers.py"):
        (folder / name).write_text((ROOT / "solutions" / name).read_text())
    source = (folder / "amp_step.py").read_text()
    assert source.count(line) == 1
    (folder / "amp_step.py").write_text(source.replace(line, replacement))
    return folder


def never_scales(folder: Path) -> Path:
    """The solution with a plain ``loss.backward()``: no loss scaling at all."""
    return solution_with(folder, "    scaler.scale(loss).backward()\n", "    loss.backward()\n")


def returns_scaled_loss(folder: Path) -> Path:
    """The solution whose only bug is returning the scaled loss (the catalogue's returns_scaled_loss, row 2.8)."""
    return solution_with(folder, "    scaler.scale(loss).backward()\n", "    loss = scaler.scale(loss)\n    loss.backward()\n")


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``grade-gpu --dry`` run over the solution, the skeleton, a never-scaling amp_step and one that
    returns the scaled loss.

    A CPU gradebook already sits in the output folder, so the run also writes the merged one.
    """
    tmp = tmp_path_factory.mktemp("gpu-dry")
    out = tmp / "out"
    out.mkdir()
    (out / "gradebook.csv").write_text("submission,score,max_score,1.1 test_x\n"
                                       "solutions,90,90,3\nassignment,0,90,0\nnever_scales,87,90,3\ncpu_only,50,90,1\n"
                                       "scaled_loss,86,90,3\n")
    done = run("-m", "autograder", "grade-gpu", "solutions", "assignment", str(never_scales(tmp / "never_scales")),
               str(returns_scaled_loss(tmp / "scaled_loss")), "--dry", "--out", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "GPU preflight: ok (cpu (dry mode)" in done.stdout and "GPU canary: solutions/ got 10 / 10" in done.stdout
    return out


def test_solution_gets_every_gpu_point_and_skeleton_none(graded: Path) -> None:
    book = read_csv(graded / "gpu_gradebook.csv")
    assert list(next(iter(book.values())).keys()) == ["submission", "gpu_score", "gpu_max", *GPU_TESTS, "gpu_device",
                                                      "gpu_status"]
    assert {row["gpu_status"] for row in book.values()} == {"dry run, not a grade"}  # CI's scores, no grade
    assert float(book["solutions"]["gpu_score"]) == float(book["solutions"]["gpu_max"]) == 10
    assert float(book["assignment"]["gpu_score"]) == 0
    results = json.loads((graded / "assignment" / "gpu_results.json").read_text())
    assert results["mode"] == "dry" and len(results["tests"]) == 3
    # One message per cause: the cause once at the top, each row one line naming what is missing.
    assert "Not implemented yet: ToyLossScaler.__init__ (Task 1), amp_step (Task 2)." in results["output"]
    assert [test["output"] for test in results["tests"]] == [
        "amp_step is not implemented yet (see Task 2 in README.md).",
        "amp_step is not implemented yet (see Task 2 in README.md).",
        "ToyLossScaler.__init__ is not implemented yet (see Task 1 in README.md)."]


def test_amp_step_without_scaling_fails_the_underflow_check(graded: Path) -> None:
    book = read_csv(graded / "gpu_gradebook.csv")
    assert float(book["never_scales"]["4.2 test_gpu_underflow_needs_the_scaler"]) == 0
    assert float(book["never_scales"]["4.3 test_gpu_toy_scaler_matches_cuda_gradscaler"]) == 2  # the scaler is fine
    rows = json.loads((graded / "never_scales" / "gpu_results.json").read_text())["tests"]
    message = next(test["output"] for test in rows if test["number"] == "4.2")
    assert "stalls" in message and "below 1e-12" in message


def test_returning_the_scaled_loss_costs_no_gpu_point(graded: Path) -> None:
    """One bug, one deduction: the scaled loss it returns costs row 2.8 (CPU), and nothing here -- the GPU rows
    judge training from the weights the grader copies out and from round trips it times, never from what amp_step
    returns."""
    book = read_csv(graded / "gpu_gradebook.csv")
    assert float(book["scaled_loss"]["gpu_score"]) == 10
    rows = json.loads((graded / "scaled_loss" / "gpu_results.json").read_text())["tests"]
    assert [test["status"] for test in rows] == ["passed"] * 3
    assert not any("scal" in test["output"].lower() for test in rows)  # no hint about scaling that does not apply


def test_the_canary_and_the_preflight_are_kept_apart_from_the_grades(graded: Path) -> None:
    canary = json.loads((graded / ".gpu-canary" / "gpu_results.json").read_text())
    assert canary["score"] == 10 and canary["status"] == "graded"
    assert ".gpu-canary" not in read_csv(graded / "gpu_gradebook.csv")
    preflight = json.loads((graded / "gpu_preflight.json").read_text())
    assert preflight["ok"] and preflight["mode"] == "dry" and preflight["facts"]["rlimit_as"] is None
    if os.geteuid() == 0:  # a uid of a block claimed as the batch workers claim theirs, not the default block
        from autograder.sandbox.uids import BLOCK, BLOCKS, UID_BASE

        uid = preflight["facts"]["uid"]
        assert UID_BASE <= uid < UID_BASE + BLOCKS * BLOCK and (uid - UID_BASE) % BLOCK != 0  # a process's, not the group


def test_grading_again_resumes_and_merges(graded: Path) -> None:
    merged = read_csv(graded / "merged_gradebook.csv")
    # a dry run's GPU scores are no grade: said in gpu_status, and no total is made of them
    assert (merged["solutions"]["gpu_status"], merged["solutions"]["total"]) == ("dry run, not a grade", "")
    assert float(merged["solutions"]["total_max"]) == 100
    assert merged["assignment"]["total"] == ""
    assert merged["cpu_only"]["gpu_score"] == "" and float(merged["cpu_only"]["total"]) == 50
    again = run("-m", "autograder", "grade-gpu", "solutions", "--dry", "--out", str(graded))
    assert again.returncode == 0 and "already graded" in again.stdout


def test_merge_joins_on_submission_and_warns_about_missing_rows(tmp_path: Path) -> None:
    from autograder.gpu import grading as gpu_grading

    cpu, gpu, out = tmp_path / "cpu.csv", tmp_path / "gpu.csv", tmp_path / "merged.csv"
    cpu.write_text("submission,name,score,max_score,1.1 t\nalice,Alice,80,90,3\nbob,Bob,90,90,3\n")
    gpu.write_text("submission,gpu_score,gpu_max,4.1 t\nbob,7.5,10,5\ncarol,10,10,5\n")
    warnings = gpu_grading.merge_gradebooks(cpu, gpu, out)
    assert warnings == ["alice: no GPU grade (total is the CPU score only)", "carol: GPU grade but no CPU grade"]
    rows = read_csv(out)
    assert list(rows["bob"].keys()) == ["submission", "name", "score", "max_score", "1.1 t", "gpu_score", "gpu_max",
                                        "4.1 t", "total", "total_max"]
    assert float(rows["bob"]["total"]) == 97.5 and float(rows["alice"]["total"]) == 80
    assert rows["carol"]["gpu_score"] == "10"
    with pytest.raises(ValueError, match="right gradebook"):
        gpu_grading.merge_gradebooks(gpu, cpu, out)
    gpu.write_text("submission,gpu_score,gpu_max,gpu_status\nbob,,10,could not be graded: grader fault\n")
    warnings = gpu_grading.merge_gradebooks(cpu, gpu, out)
    assert "bob: GPU part could not be graded: grader fault (total is the CPU score only)" in warnings
    assert float(read_csv(out)["bob"]["total"]) == 90


def test_merge_command(tmp_path: Path) -> None:
    cpu, gpu, out = tmp_path / "cpu.csv", tmp_path / "gpu.csv", tmp_path / "merged.csv"
    cpu.write_text("submission,score,max_score\nbob,90,90\n")
    gpu.write_text("submission,gpu_score,gpu_max\nbob,7.5,10\n")
    done = run("-m", "autograder", "merge", str(cpu), str(gpu), "--out", str(out))
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert float(read_csv(out)["bob"]["total"]) == 97.5


def test_bench_dry_prints_the_table_and_writes_the_png(tmp_path: Path) -> None:
    png, data = tmp_path / "bench.png", tmp_path / "bench.json"
    done = run("benchmarks/gpu_bench.py", "--dry", "--plot", str(png), "--json", str(data))
    assert done.returncode == 0, done.stderr[-3000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report: dict[str, Any] = json.loads(data.read_text())
    assert [run["label"] for run in report["runs"]] == ["fp32 (TF32 off)", "fp16 + GradScaler", "bf16"]
    assert all(run["time_to_target_ms"] is not None for run in report["runs"])
    assert report["tf32"]["float32_matmul_precision"] == "highest"
    for text in ("TF32 off", "speed-up", "TFLOP/s", "peak memory"):
        assert text in done.stdout


@pytest.mark.skipif(cuda_works(), reason="CUDA is available: the GPU checks run instead of skipping")
def test_gpu_checks_skip_with_a_reason_without_cuda() -> None:
    done = run("-m", "pytest", "checks/test_gpu.py", "-rs", cwd=ROOT / "assignment",
               env={"AMP_SUBMISSION": str(ROOT / "solutions"), "AMP_GPU_DRY": ""})
    assert done.returncode == 0 and "3 skipped" in done.stdout, done.stdout[-2000:]
    assert "needs an NVIDIA GPU with CUDA" in done.stdout and "AMP_GPU_DRY=1" in done.stdout


def test_zygote_preloads_the_gpu_runs() -> None:
    """(That nothing touches CUDA before the fork: tests/test_gpu_faults.py.)"""
    code = ("from autograder.sandbox import runner as sandbox\nfrom checks.runners import registry\n"
            "assert registry.registered('gpu_train') and registry.registered('amp_probe')\n"
            "assert set(sandbox.SCENARIO_NEEDS) >= {'gpu_train', 'gpu_train_fp32', 'gpu_underflow', 'gpu_scaler_ops', 'gpu_preflight'}\n"
            "assert sandbox.SCENARIO_NEEDS['gpu_train_fp32'] == ()\n")
    done = run("-c", code, env={"PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'assignment'}"})
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_dry_run_reaches_the_lms_file_and_report_html_as_no_grade(graded: Path) -> None:
    """gpu_scores.csv (Canvas's import columns) has a row per submission with no score and the dry status; the class
    report rebuilt after grade-gpu shows the GPU part, each submission's failed GPU rows, and says it is no grade."""
    with (graded / "gpu_scores.csv").open(newline="") as stream:
        lines = list(csv.reader(stream))
    assert lines[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "GPU part", "GPU status"]
    assert sorted(lines[1:]) == [[name, "", "", "", "", "", "dry run, not a grade"]
                                 for name in ("assignment", "never_scales", "scaled_loss", "solutions")]
    page = (graded / "report.html").read_text()
    part = page.split('<section id="gpu">', 1)[1].split("</section>", 1)[0]
    assert "4 of them are a dry run (on the CPU, no speed check): their scores are no grade." in part
    rows = {row.split("</a>", 1)[0].rsplit(">", 1)[1]: row for row in part.split("<tr>")[2:]}
    assert "<td>10 / 10</td><td>-</td><td>dry run, not a grade</td>" in rows["solutions"]
    assert "<td>7 / 10</td><td>4.2</td><td>dry run, not a grade</td>" in rows["never_scales"]


def test_the_lms_file_gives_each_student_of_a_group_the_score_and_no_ungraded_a_number(tmp_path: Path) -> None:
    from autograder.gpu import gradebook

    (tmp_path / "gpu_gradebook.csv").write_text(
        "submission,gpu_score,gpu_max,gpu_device,gpu_status\n"
        "pair,7.5,10,H100,graded\nbroken,,10,H100,could not be graded: preflight\nlone,10,10,H100,graded\n"
        "dry,10,10,cpu (dry mode),\"dry run, not a grade\"\n")
    students = {"pair": [("Ada Lovelace", "1815", "ada@example.edu"), ("Alan Turing", "1912", "alan@example.edu")],
                "broken": [("Bo", "2001", "bo@example.edu")]}
    assert gradebook.lms_rows(tmp_path / "gpu_gradebook.csv", students) == [
        ["Ada Lovelace", "", "1815", "ada@example.edu", "", "7.5", "graded"],
        ["Alan Turing", "", "1912", "alan@example.edu", "", "7.5", "graded"],
        ["Bo", "", "2001", "bo@example.edu", "", "", "could not be graded: preflight"],
        ["lone", "", "", "", "", "10", "graded"],
        ["dry", "", "", "", "", "", "dry run, not a grade"]]  # a dry run's 10 is no grade
