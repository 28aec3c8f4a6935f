"""Grading the GPU part (staff, on a machine with an NVIDIA GPU).

``python -m autograder grade-gpu SUBMISSION... --out DIR [--dry [VALUE]]`` runs only the GPU
tests (:data:`autograder.engine.rubric.GPU_ITEMS`, ``assignment/checks/test_gpu.py``) against
each submission, in the same sandboxed student process as the CPU grading but with
GPU-friendly limits (:func:`gpu_limits`: no address-space limit, which breaks CUDA;
longer calls), and writes

* ``DIR/<submission>/gpu_results.json``: score, rows (Gradescope's test format), device;
* ``DIR/gpu_gradebook.csv``: ``submission``, ``gpu_score``, ``gpu_max``, one column per
  GPU test, ``gpu_device``, ``gpu_status`` ("graded", or "could not be graded: why", with
  empty score cells: never a zero);
* ``DIR/gpu_scores.csv``: one row per student (name, SID, email, GPU score, status) as Canvas's gradebook import
  takes it (:func:`autograder.gpu.gradebook.lms_rows`; docs/platforms.md says how each platform takes it);
* ``DIR/gpu_preflight.json``: what the preflight found (device, compute mode, the line);
* ``DIR/merged_gradebook.csv`` when ``DIR/gradebook.csv`` (the CPU gradebook) is there,
  or ``--merge-with CPU.csv`` names one: see :func:`merge_gradebooks` and
  ``python -m autograder merge CPU.csv GPU.csv --out merged.csv``.

Submissions are found as the CPU batch finds them (:func:`autograder.batch.inputs.discover`),
so both gradebooks name them alike and merge row by row.  A submission whose
``gpu_results.json`` exists is not graded again (rerun after an interruption), unless
``--force`` (one that could not be graded is graded again).  ``--dry`` (or ``--dry 1``,
``AMP_GPU_DRY=1``; ``0``/``false``/``no`` mean the real run, see :mod:`checks.gpu_mode`) runs the same path on the CPU, tiny and
without the speed assertion: CI uses it; its scores say nothing about speed.

Slurm: one GPU grades submissions one after another (timings must not share a GPU).
Where the GPUs sit behind Slurm, the batch grader's ``--executor slurm`` can run
:func:`grade_gpu_submission` (same arguments and result shape as
``autograder.batch.worker.grade_submission``) per submission in a GPU job array, write each
result with :func:`write_submission_result`, and build the gradebook with
:func:`collect`.  Or, by hand: one ``sbatch --gres=gpu:1`` job per chunk of submissions,
each running ``grade-gpu`` into its own ``--out``, then ``merge``.

Import order: the sandbox's zygote is started before pytest is imported (as in the
CPU grading), and nothing here touches CUDA before it forks.

Before anyone is graded: a preflight (:mod:`autograder.gpu.preflight`: CUDA works in a
sandboxed student process, its uid can open the device nodes, the library folders are
visible, the compute mode allows it) and a canary (``solutions/`` graded through the same
sandbox must get full marks).  Either failing stops the run with one clear line.  A
device failure the student process reports on the grader's side (CUDA initialisation
error, out of memory, "CUDA error" outside the student's frames) is checked by the judge's
own canary (:meth:`GpuRunner.canary`): if that fails too, the submission is marked "could
not be graded" with the staff traceback -- never a zero; if it runs, the failure is the
submission's.  The judge holds no CUDA context: the references run in a
separate trusted process (:mod:`checks.judge.gpu_reference`).

The command lines (``grade-gpu``, ``merge``) are :mod:`autograder.gpu.cli`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import time
import traceback
from pathlib import Path
from typing import Any, Iterator, Sequence

from autograder.engine import rubric, strings
from autograder import ROOT, settings
from autograder.gpu.gradebook import (RESULTS_FILE, STAFF_FILE, collect, gpu_max_points,  # noqa: F401 - API
                                      merge_gradebooks, write_submission_result)
from checks.gpu_mode import dry_from_env

CANARY = ".gpu-canary"  # OUT/.gpu-canary/gpu_results.json: the canary's grades (not in the gradebook)
SOLUTIONS = ROOT / "solutions"
#: Limits of a GPU student process: CUDA needs a large address space (no RLIMIT_AS), threads and
#: files; the speed check asks for one long call.  ``$AMP_SANDBOX_LIMITS`` overrides them, except
#: :data:`GPU_FIXED` (an address-space limit stops CUDA from starting).
GPU_LIMITS: dict[str, Any] = {
    "memory_bytes": None, "call_seconds": 120.0, "max_call_seconds": 900.0, "import_seconds": 60.0,
    "submission_seconds": 1800.0, "cpu_seconds": 3600, "processes": 512, "file_bytes": 256 * 2**20,
    "open_files": 1024,
}
GPU_FIXED = ("memory_bytes",)


def _env_limits() -> dict[str, Any]:
    return settings.sandbox_limits()


def gpu_limits(**overrides: Any) -> Any:
    """``sandbox.Limits`` for GPU grading: :data:`GPU_LIMITS`, then ``$AMP_SANDBOX_LIMITS``, then ``overrides``;
    :data:`GPU_FIXED` fields keep their GPU value whatever the environment says (see :func:`limit_warnings`)."""
    from autograder.sandbox import runner as sandbox

    known = {f.name for f in dataclasses.fields(sandbox.Limits)}
    fields = {k: v for k, v in {**GPU_LIMITS, **_env_limits(), **overrides}.items() if k in known}
    fields.update({k: GPU_LIMITS[k] for k in GPU_FIXED})
    return sandbox.Limits(**fields)


def limit_warnings() -> list[str]:
    """Fields of ``$AMP_SANDBOX_LIMITS`` that GPU grading ignores, in words."""
    return [f"AMP_SANDBOX_LIMITS sets {name}, which GPU grading ignores (an address-space limit stops CUDA "
            "from starting)" for name in GPU_FIXED if _env_limits().get(name) is not None]


def resolve_dry(flag: bool | None) -> bool:
    """``--dry VALUE`` when given (already parsed), else ``$AMP_GPU_DRY``, through :func:`checks.gpu_mode.parse_dry`."""
    return dry_from_env() if flag is None else flag


class GpuRunner:
    """The judge's runner for the GPU part: a sandbox runner that also says which device the checks
    use and where the trusted references run.  In an exclusive compute mode the student's process
    ends after every call, so that it and the reference process take turns on the GPU -- except
    inside :meth:`held`, where a timed series (a warm-up, then the timed calls) keeps its process
    and its CUDA context, so that no timed round trip includes starting CUDA."""

    def __init__(self, inner: Any, device: str, reference: Any, exclusive: bool) -> None:
        self.inner, self.device, self.reference, self.exclusive = inner, device, reference, exclusive
        self._held = False

    def run(self, scenario: str, args: dict[str, Any], *, timeout: float | None = None) -> Any:
        try:
            return self.inner.run(scenario, args, timeout=timeout)
        finally:
            if self.exclusive and not self._held:
                self.inner.release()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Calls made inside keep their student process; in an exclusive mode it ends when the block does."""
        self._held = True
        try:
            yield
        finally:
            self._held = False
            if self.exclusive:
                self.inner.release()

    def canary(self, scenario: str, args: dict[str, Any]) -> Any:
        """The judge's own evidence after a student process claimed a device failure in ``scenario``: the
        grader's side of it rerun now, on the same device, in a process that imports no submission file
        (``gpu_canary``); ``{"ok": None}`` when it ran (the failure was the submission's), else
        ``{"grader_fault": ...}``.  The submission's processes are stopped first (an exclusive compute mode
        lets one process hold the GPU)."""
        from checks.runners.harness import SubmissionFault

        self.inner.release()
        try:
            return self.inner.run("gpu_canary", {"scenario": scenario, "args": args})
        except SubmissionFault as exc:  # no submission code runs there: a crash is the grader's
            return {"grader_fault": {"type": "SubmissionFault", "message": str(exc)[:2000], "trace": ""}}
        finally:
            if self.exclusive:
                self.inner.release()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def gpu_results(report: Any, setup: Any, name: str = "") -> dict[str, Any]:
    """The gpu_results.json object of one graded submission (rows as in Gradescope's results)."""
    from autograder.diagnosis.match import diagnosed_results

    data = diagnosed_results(report, name)
    data["tests"] = [test for test in data["tests"] if test.get("number") in {i.number for i in rubric.GPU_ITEMS}]
    data["max_score"] = gpu_max_points()
    data["mode"] = "dry" if setup.dry else "cuda"
    data["device"] = setup.device_name
    return data


def error_gpu_results(message: str, dry: bool) -> dict[str, Any]:
    rows = [{"name": strings.row_name(item), "number": item.number, "score": 0.0, "max_score": item.points,
             "status": "failed", "output": message, "visibility": item.visibility} for item in rubric.GPU_ITEMS]
    return {"score": 0.0, "max_score": gpu_max_points(), "execution_time": 0.0, "output": message, "tests": rows,
            "mode": "dry" if dry else "cuda", "device": ""}


def _errored(reason: str, dry: bool, staff_log: str, started: float, message: str = "") -> dict[str, Any]:
    """An errored GPU grade; ``message`` is the student's (default: the grader's internal problem)."""
    message = message or strings.fallback_text("gpu_fault")
    return {"status": "errored", "reason": reason[:500], "results": error_gpu_results(message, dry),
            "staff_log": staff_log, "seconds": round(time.monotonic() - started, 3)}


def grade_gpu_submission(name: str, path: Path, hide: Sequence[str], limits: Any = None, uid: int | None = None,
                         *, dry: bool | None = None, setup: Any = None, reference: Any = None) -> dict[str, Any]:
    """Grade the GPU part of one folder/zip; never raises for the submission's faults.

    Same shape as ``autograder.batch.worker.grade_submission``: ``status`` ("graded" or
    "errored": could not be graded), ``reason``, ``results`` (the gpu_results.json object),
    ``staff_log``, ``seconds``.  ``setup`` comes from a passed preflight (run here when
    missing); ``reference`` is where the trusted references run (a ``ReferenceProcess``
    made here when missing).  The caller must have started the zygote before importing pytest.
    """
    from autograder.engine import intake, judge
    from autograder.gpu.preflight import PreflightFailed, preflight
    from autograder.sandbox.runner import SandboxRunner
    from checks.judge.gpu_reference import ReferenceProcess

    started = time.monotonic()
    dry = resolve_dry(dry) if setup is None else setup.dry
    limits = limits or gpu_limits()
    try:
        setup = setup or preflight(dry, limits, uid, hide)
    except PreflightFailed as exc:
        return _errored(f"GPU preflight failed: {exc}", dry, "", started)
    try:
        staged = intake.stage(path)
    except intake.IntakeError as exc:
        return {**_errored(str(exc), dry, "", started, str(exc))}
    runner = None
    own_reference = reference is None
    reference = reference or ReferenceProcess(one_call=setup.exclusive)
    try:
        inner = SandboxRunner(staged.folder, limits=limits, hide=tuple(hide), uid=uid, device=setup.access)
        runner = GpuRunner(inner, setup.device, reference, setup.exclusive)
        report = judge.grade_staged(runner, items=rubric.GPU_ITEMS, notes=staged.notes)
        # Rows the judge's own code failed in (a GraderFault confirmed by the canary, the reference process...): not
        # the student's zero.  Decided by where the exception came from, never by a message's words.
        internal = [row.item.number for row in report.rows if row.internal]
        if internal:
            return _errored(f"grader fault in test {', '.join(internal)} (see {STAFF_FILE})", dry, report.staff_log,
                            started)
        data = gpu_results(report, setup, name)
        json.dumps(data, allow_nan=False)
        return {"status": "graded", "reason": "", "results": data, "staff_log": report.staff_log,
                "seconds": round(time.monotonic() - started, 3)}
    except Exception as exc:  # noqa: BLE001 - a grader fault must not stop the batch
        return _errored(f"grader fault ({type(exc).__name__}: {exc})", dry, traceback.format_exc(), started)
    finally:
        if runner is not None:
            runner.inner.close()
        if own_reference:
            reference.close()
        shutil.rmtree(staged.folder, ignore_errors=True)


# --------------------------------------------------------------------------- commands


def run_canary(out: Path, hide: Sequence[str], limits: Any, uid: int | None, setup: Any, reference: Any) -> str:
    """Grade ``solutions/`` through the same sandbox; return a one-line verdict, or raise PreflightFailed."""
    from autograder.gpu.preflight import PreflightFailed

    if not (SOLUTIONS / "amp_step.py").is_file():
        raise PreflightFailed(f"no reference solution at {SOLUTIONS} to grade as the canary")
    outcome = grade_gpu_submission("solutions", SOLUTIONS, hide, limits, uid, setup=setup, reference=reference)
    write_submission_result(out, CANARY, outcome)
    data, where = outcome["results"], out / CANARY / RESULTS_FILE
    if outcome["status"] != "graded":
        raise PreflightFailed(f"the canary (solutions/) could not be graded: {outcome['reason']} (see {where})")
    if data["score"] < gpu_max_points():
        lost = next(test for test in data["tests"] if test.get("status") != "passed")
        first = (lost.get("output") or "").strip().splitlines()[:1]
        raise PreflightFailed(f"the canary (solutions/) scored {data['score']:g} / {gpu_max_points():g}, not full "
                              f"marks: {lost['name']} failed ({first[0][:200] if first else 'no message'}); see {where}")
    return f"GPU canary: solutions/ got {data['score']:g} / {gpu_max_points():g} on {data['device']}"
