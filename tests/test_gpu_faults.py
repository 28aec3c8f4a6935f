"""The GPU part's failures are loud: each simulated on the CPU stops the run at the preflight or
marks the submission "could not be graded" -- never a silent zero.

Simulated here: CUDA unavailable in the student process, a library folder covered by the
sandbox, an exclusive compute mode, an address-space limit (``memory_bytes``), a device
failure in the grader's code inside the student process, and CUDA initialised before the
zygote forks.  Tests that need the real thing (a GPU) say so and skip.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from conftest import ROOT, cuda_failed_to_start, cuda_works

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's covers and uid drop need root")
NO_CUDA_ONLY = pytest.mark.skipif(cuda_works(), reason="CUDA is available: this simulates a CPU-only box")
CUDA_ONLY = pytest.mark.skipif(not cuda_works(), reason="needs an NVIDIA GPU with CUDA (none here)")


def python(code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **(env or {})})


def grade_gpu(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autograder", "grade-gpu", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


@pytest.fixture(scope="module")
def zygote() -> Any:
    """The sandbox's zygote, forked from this test process (the tests below run no judge in it)."""
    from autograder.sandbox import runner as sandbox

    return sandbox.start_zygote()


# --------------------------------------------------------------------------- preflight: CUDA unavailable


@NO_CUDA_ONLY
def test_cuda_unavailable_in_the_student_process_stops_before_anyone_is_graded(tmp_path: Path) -> None:
    done = grade_gpu("solutions", "assignment", "--dry", "0", "--out", str(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("GPU preflight failed: CUDA does not work in the sandboxed "
                                                   "student process"), done.stderr
    # why, in the words of the torch installed: a CPU build is "built without CUDA", a CUDA build names the driver
    assert ("built without CUDA" if torch.version.cuda is None else "NVIDIA driver") in lines[0]
    assert not list(tmp_path.glob(f"*/gpu_results.json")) and not (tmp_path / "gpu_gradebook.csv").exists()
    assert json.loads((tmp_path / "gpu_preflight.json").read_text())["ok"] is False


@CUDA_ONLY
def test_preflight_creates_a_cuda_tensor_in_a_forked_student_process(tmp_path: Path) -> None:
    """On a GPU: the zygote forked before CUDA was touched, so its child can compute on the device."""
    done = grade_gpu("solutions", "--preflight-only", "--dry", "0", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    facts = json.loads((tmp_path / "gpu_preflight.json").read_text())["facts"]
    assert facts["cuda"]["matmul_ok"] and not facts["cuda_initialized_at_fork"]


# --------------------------------------------------------------------------- preflight: what the child sees


@ROOT_ONLY
def test_library_folders_stay_visible_and_a_covered_one_stops_the_preflight(zygote: Any, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from autograder.gpu import access as gpu_access, grading as gpu_grading
    from autograder.sandbox import runner as sandbox
    from autograder.gpu.preflight import PreflightFailed, preflight

    libs = tmp_path / "cuda" / "lib64"  # under /tmp, in no view unless kept
    libs.mkdir(parents=True)
    (libs / "libcudart.so.12").write_text("")
    plan = gpu_access.plan_access([str(sandbox.REPO_ROOT)], env={"LD_LIBRARY_PATH": f"{libs}:relative/lib"})
    assert str(libs.resolve()) in plan.keep and any("relative" in why for why in plan.refused)
    setup = preflight(True, gpu_grading.gpu_limits(), None, (), plan=plan)
    assert setup.facts["hidden_folders"] == []
    monkeypatch.setattr(gpu_access, "device_access", lambda plan: sandbox.DeviceAccess((), tuple(plan.groups)))
    with pytest.raises(PreflightFailed, match="hides folders that CUDA loads libraries from") as failed:
        preflight(True, gpu_grading.gpu_limits(), None, (), plan=plan)
    assert str(libs.resolve()) in str(failed.value) and "\n" not in str(failed.value)


def test_folders_holding_the_grader_are_never_kept_visible(tmp_path: Path) -> None:
    from autograder.gpu import access as gpu_access
    from autograder.sandbox import runner as sandbox

    env = {"LD_LIBRARY_PATH": os.pathsep.join([str(ROOT), str(ROOT / "autograder"), "/home", ""]),
           "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path)}
    plan = gpu_access.plan_access([str(ROOT)], env=env)
    assert str(ROOT) not in plan.keep and str(ROOT / "autograder") not in plan.keep and "/home" not in plan.keep
    assert str(tmp_path.resolve()) in plan.keep  # the MPS pipe folder, under /tmp
    assert any(str(torch.__file__).startswith(os.path.dirname(folder)) for folder in plan.keep)  # torch/lib


def test_memory_bytes_cannot_bring_back_an_address_space_limit(zygote: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from autograder.gpu import access as gpu_access, grading as gpu_grading
    from autograder.sandbox import runner as sandbox
    from autograder.gpu.preflight import PreflightFailed, preflight

    monkeypatch.setenv("AMP_SANDBOX_LIMITS", json.dumps({"memory_bytes": 8 * 2**30, "call_seconds": 33}))
    limits = gpu_grading.gpu_limits()
    assert limits.memory_bytes is None and limits.call_seconds == 33
    assert any("memory_bytes" in warning for warning in gpu_grading.limit_warnings())
    with_limit = sandbox.Limits(**{**limits.__dict__, "memory_bytes": 8 * 2**30})
    setup = preflight(True, with_limit, None, ())  # a GPU student process never gets RLIMIT_AS...
    assert setup.facts["rlimit_as"] is None
    monkeypatch.setattr(gpu_access, "device_access", lambda plan: None)  # ...and if the sandbox applied it:
    with pytest.raises(PreflightFailed, match=r"address-space limit \(RLIMIT_AS = 8589934592 bytes\)"):
        preflight(True, with_limit, None, ())


def test_exclusive_compute_mode_error_is_one_clear_line() -> None:
    from autograder.gpu import access as gpu_access
    from autograder.gpu.preflight import problems

    report = {"torch": "2.13.0", "torch_cuda": "12.8", "rlimit_as": None, "hidden_folders": [], "nodes": {},
              "cuda": {"available": True, "error": "AcceleratorError: CUDA error: CUDA-capable device(s) is/are "
                                                   "busy or unavailable"}}
    found = problems(report, gpu_access.AccessPlan(), "EXCLUSIVE_PROCESS", dry=False)
    assert len(found) == 1 and "busy or unavailable" in found[0] and "EXCLUSIVE_PROCESS compute mode" in found[0]
    assert problems({**report, "cuda": {"available": True, "matmul_ok": True}}, gpu_access.AccessPlan(),
                    "EXCLUSIVE_PROCESS", dry=False) == []
    assert "PROHIBITED" in problems({**report, "cuda": {"available": True, "matmul_ok": True}},
                                    gpu_access.AccessPlan(), "PROHIBITED", dry=False)[0]
    closed = problems({**report, "uid": 65001, "groups": [], "nodes": {"/dev/nvidia0": False}}, gpu_access.AccessPlan(),
                      "DEFAULT", dry=True)
    assert len(closed) == 1 and "cannot open /dev/nvidia0" in closed[0]


def test_in_an_exclusive_mode_the_student_and_the_reference_take_turns() -> None:
    from autograder.gpu.grading import GpuRunner
    from checks.judge.gpu_reference import ReferenceProcess

    class Inner:
        def __init__(self) -> None:
            self.events: list[str] = []

        def run(self, scenario: str, args: dict[str, Any], *, timeout: float | None = None) -> Any:
            self.events.append("run")
            return 1

        def release(self) -> None:
            self.events.append("release")

    inner = Inner()
    assert GpuRunner(inner, "cuda", None, exclusive=True).run("gpu_train", {}) == 1
    assert GpuRunner(inner, "cuda", None, exclusive=False).run("gpu_train", {}) == 1
    assert inner.events == ["run", "release", "run"]
    inner.events.clear()
    runner = GpuRunner(inner, "cuda", None, exclusive=True)
    with runner.held():  # a timed series (warm-up, timed calls) keeps its process and CUDA context
        runner.run("gpu_train", {})
        runner.run("gpu_train", {})
    assert inner.events == ["run", "run", "release"]
    reference = ReferenceProcess(one_call=True)
    ops = {"world": {"optimizers": [{"groups": [[2]]}], "device": "cpu"},
           "ops": [{"op": "new", "kwargs": {"init_scale": 8.0}}, {"op": "observe"}]}
    assert reference.call("scaler_ops", ops) == [{"ok": None}, {"ok": {"scale": 8.0, "tracker": 0}}]
    assert reference._process is None  # ended: its CUDA context would be gone before the student's next call


def test_device_node_groups_keep_only_what_the_nodes_need(tmp_path: Path) -> None:
    from autograder.gpu import access as gpu_access

    for name, mode, gid in (("nvidia0", 0o660, 44), ("nvidiactl", 0o666, 45), ("nvidia-uvm", 0o660, 0),
                            ("nvidia1", 0o600, 46)):
        (tmp_path / name).write_text("")
        os.chmod(tmp_path / name, mode)
        if os.geteuid() == 0:
            os.chown(tmp_path / name, 0, gid)
    nodes = gpu_access.device_nodes(str(tmp_path))
    assert [Path(n).name for n in nodes] == ["nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"]
    if os.geteuid() == 0:  # world-usable, root's group and group-less nodes add nothing
        assert gpu_access.node_groups(nodes) == [44]


def test_compute_mode_is_matched_by_uuid() -> None:
    from autograder.gpu import access as gpu_access

    devices = [{"index": 0, "uuid": "GPU-aaa", "name": "x", "mode": "DEFAULT"},
               {"index": 1, "uuid": "GPU-bbb", "name": "x", "mode": "EXCLUSIVE_PROCESS"}]
    assert gpu_access.mode_of(devices, "bbb") == "EXCLUSIVE_PROCESS"
    assert gpu_access.mode_of(devices, None) == "unknown" and gpu_access.mode_of(None, "aaa") == "unknown"


class FakeNvml:
    """The few NVML calls :func:`compute_modes` makes, over two GPUs (answers written through the byref pointers)."""

    GPUS = [(b"GPU-aaa", b"Simulated A", 0), (b"GPU-bbb", b"Simulated B", 3)]

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> int:
            self.calls.append(name)
            if name == "nvmlDeviceGetCount_v2":
                args[0]._obj.value = len(self.GPUS)
            elif name == "nvmlDeviceGetHandleByIndex_v2":
                args[1]._obj.value = args[0] + 1
            elif name in ("nvmlDeviceGetComputeMode", "nvmlDeviceGetName", "nvmlDeviceGetUUID"):
                uuid, label, mode = self.GPUS[args[0].value - 1]
                if name == "nvmlDeviceGetComputeMode":
                    args[1]._obj.value = mode
                else:
                    args[1].value = uuid if name == "nvmlDeviceGetUUID" else label
            return 0
        return call


def test_compute_mode_is_read_through_nvml_and_never_through_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every GPU's mode comes from NVML (the fake library here), and CUDA's initialisation is never reached: a
    CUDA context would block the student process in an exclusive mode."""
    import ctypes

    from autograder.gpu import access as gpu_access

    nvml, real_cdll = FakeNvml(), ctypes.CDLL
    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: nvml if name == "libnvidia-ml.so.1" else real_cdll(name, *a, **k))

    def no_cuda(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("compute_modes initialised CUDA")

    for owner, name in ((torch.cuda, "_lazy_init"), (torch.cuda, "init"), (torch.cuda, "is_available"),
                        (torch.cuda, "device_count"), (torch._C, "_cuda_init"), (torch._C, "_cuda_getDeviceCount")):
        if hasattr(owner, name):
            monkeypatch.setattr(owner, name, no_cuda)
    devices = gpu_access.compute_modes()
    assert devices == [{"index": 0, "uuid": "GPU-aaa", "name": "Simulated A", "mode": "DEFAULT"},
                       {"index": 1, "uuid": "GPU-bbb", "name": "Simulated B", "mode": "EXCLUSIVE_PROCESS"}]
    assert nvml.calls[0] in ("nvmlInit_v2", "nvmlInit") and nvml.calls[-1] == "nvmlShutdown"
    assert gpu_access.mode_of(devices, "GPU-bbb") == "EXCLUSIVE_PROCESS"


# --------------------------------------------------------------------------- grader faults are not zeros


def _submission(tmp_path: Path, amp_step_body: str | None = None) -> Path:
    folder = tmp_path / "sub"
    folder.mkdir()
    for name in ("loss_scaler.py", "amp_step.py", "answers.py"):
        (folder / name).write_text((ROOT / "solutions" / name).read_text())
    if amp_step_body:
        (folder / "amp_step.py").write_text(amp_step_body)
    return folder


@NO_CUDA_ONLY
def test_a_device_failure_in_the_graders_code_is_a_grader_fault(tmp_path: Path) -> None:
    from checks.runners import gpu_runs, harness

    submission = harness.Submission(_submission(tmp_path))
    for name, args in (("gpu_train", {"device": "cuda", "steps": 2}), ("gpu_train_fp32", {"device": "cuda", "steps": 2}),
                       ("gpu_underflow", {"device": "cuda"}),
                       ("gpu_scaler_ops", {"world": {"optimizers": [{"groups": [[2]]}], "device": "cuda"},
                                           "ops": [{"op": "new"}]})):
        got = gpu_runs.run_scenario(name, args, submission)
        assert set(got) == {"grader_fault"}, (name, got)
        assert cuda_failed_to_start(got["grader_fault"]["trace"]), got["grader_fault"]["trace"]


def test_a_cuda_error_raised_by_the_students_code_stays_the_students(tmp_path: Path) -> None:
    from checks.runners import gpu_runs, harness

    body = "def amp_step(*args, **kwargs):\n    raise RuntimeError('CUDA error: an illegal memory access')\n"
    submission = harness.Submission(_submission(tmp_path, body))
    got = gpu_runs.run_scenario("gpu_underflow", gpu_runs.underflow_args("cpu", steps=2), submission)
    assert "grader_fault" not in got and got["error"]["message"] == "CUDA error: an illegal memory access"
    assert "amp_step.py, line 2" in got["error"]["trace"]

    def graders_own_code() -> None:
        raise RuntimeError("CUDA error: an illegal memory access")

    with pytest.raises(harness.GraderSideError):  # the same error from the grader's own code is not the student's
        harness.guarded(graders_own_code, submission.root)


@NO_CUDA_ONLY
def test_a_grader_fault_marks_the_submission_ungraded_never_zero(tmp_path: Path) -> None:
    """Real mode on a CPU build: the student process cannot start CUDA in the grader's code."""
    code = f"""
        import json, sys
        from pathlib import Path
        from autograder.sandbox import runner as sandbox
        sandbox.start_zygote()
        from autograder.gpu import grading as gpu_grading
        from autograder.gpu.preflight import Setup
        from checks.judge import gpu_reference

        class CpuReference:  # the trusted references as on a GPU, computed on the CPU (4.1 asks for none: its
            def call(self, kind, args):  # float32 baseline runs in a student process, and fails there as AMP does)
                args = json.loads(json.dumps(args).replace('"cuda"', '"cpu"'))
                return gpu_reference.compute(kind, args)
            def close(self):
                pass

        setup = Setup(dry=False, device="cuda", device_name="simulated GPU", access=sandbox.DeviceAccess())
        out = Path(sys.argv[1])
        outcome = gpu_grading.grade_gpu_submission("alice", Path("solutions"), (), setup=setup,
                                                   reference=CpuReference())
        gpu_grading.write_submission_result(out, "alice", outcome)
        gpu_grading.collect(out)
        print(json.dumps(outcome))
    """
    done = python(code, str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["status"] == "errored" and "grader fault in test 4.1, 4.2, 4.3" in outcome["reason"]
    assert cuda_failed_to_start(outcome["staff_log"]) and "GraderFault" in outcome["staff_log"]
    assert all("not your fault" in test["output"] for test in outcome["results"]["tests"])
    with (tmp_path / "gpu_gradebook.csv").open(newline="") as stream:
        row = next(csv.DictReader(stream))
    assert row["submission"] == "alice" and row["gpu_score"] == "" and row["4.1 test_gpu_amp_reaches_fp32_loss_sooner"] == ""
    assert row["gpu_status"].startswith("could not be graded: grader fault in test 4.1, 4.2, 4.3")


# --------------------------------------------------------------------------- the zygote


def test_nothing_touches_cuda_before_the_zygote_forks(tmp_path: Path) -> None:
    """Runs ``grade-gpu`` itself (its preflight, dry) with every CUDA entry point (torch.cuda's and torch._C's)
    recorded, and reads the record when it starts the zygote: empty.  The spies are shown to work by a call
    made after the run."""
    code = """
        import json, sys
        import torch

        touched = []
        def spy(owner, name):
            original = getattr(owner, name)
            def wrapper(*args, **kwargs):
                touched.append(name)
                return original(*args, **kwargs)
            setattr(owner, name, wrapper)
        for owner, name in ((torch.cuda, "_lazy_init"), (torch.cuda, "init"), (torch.cuda, "is_available"),
                            (torch.cuda, "device_count"), (torch.cuda, "current_device"),
                            (torch.cuda, "get_device_properties"), (torch.cuda, "synchronize"),
                            (torch._C, "_cuda_init"), (torch._C, "_cuda_getDeviceCount")):
            if hasattr(owner, name):
                spy(owner, name)
        from autograder.sandbox import runner as sandbox
        seen = {}
        real_start = sandbox.start_zygote
        def start_zygote(*args, **kwargs):  # grade-gpu imports it from the module when it runs: this one
            if "before_fork" not in seen:  # the first call forks the zygote; later ones return it
                seen["before_fork"] = list(touched)
                seen["loaded"] = [m for m in ("checks.judge.gpu_reference", "autograder.gpu.preflight") if m in sys.modules]
                seen["import_dynamo"] = kwargs.get("import_dynamo", False)
            return real_start(*args, **kwargs)
        sandbox.start_zygote = start_zygote
        from autograder.cli import main
        seen["status"] = main(["grade-gpu", "solutions", "--preflight-only", "--dry", "1", "--out", sys.argv[1]])
        count = len(touched)
        torch.cuda.is_available()
        seen["after"] = touched[count:]
        print(json.dumps(seen))
    """
    done = python(code, str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["status"] == 0 and "before_fork" in seen, seen  # the real command reached the fork
    assert seen["before_fork"] == []
    assert seen["loaded"] == ["checks.judge.gpu_reference", "autograder.gpu.preflight"] and seen["import_dynamo"] is True
    assert seen["after"][0] == "is_available"  # the spies do record (a CUDA build's asks torch._C too)
