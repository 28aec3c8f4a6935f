"""The preflight of ``grade-gpu``: is the GPU usable from a sandboxed student process?

Before anyone is graded, :func:`preflight` starts one student process exactly as
grading will (same zygote, uid, limits, covers and :class:`~autograder.sandbox.runner.DeviceAccess`),
with an empty submission (no student code runs), and asks it (scenario ``gpu_preflight``):
does CUDA start and compute there, can the uid open ``/dev/nvidia*``, are the library
folders visible, is there no address-space limit, was CUDA initialised before the fork?
It also reads the GPU's compute mode through NVML (no CUDA context on the trusted side).
Any problem stops the run with :class:`PreflightFailed`, whose text is one clear line.

A passing preflight returns a :class:`Setup`: the device string, its name, and whether
the GPU is in an exclusive compute mode (then the student's process and the trusted
reference process take turns: see ``autograder.gpu.grading.GpuRunner``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from autograder.gpu import access as gpu_access

PREFLIGHT_SECONDS = 180.0  # a cold CUDA start (driver, lazy module loading) can take a minute on a busy node


class PreflightFailed(Exception):
    """The GPU cannot be used for grading; ``str()`` is one line saying what failed, ``facts`` what the
    student process reported (kept in ``gpu_preflight.json``: the line names the problem, the facts its context)."""

    def __init__(self, line: str, facts: dict[str, Any] | None = None) -> None:
        super().__init__(line)
        self.facts = facts or {}


@dataclass
class Setup:
    """What grading needs from a passed preflight."""

    dry: bool
    device: str  # "cuda", or "cpu" in dry mode
    device_name: str
    compute_mode: str = "n/a"
    exclusive: bool = False  # one CUDA process at a time (exclusive or unknown compute mode)
    access: Any = None  # the sandbox's DeviceAccess
    isolation: str = "none"  # the level the preflight's student process reached (autograder.sandbox.confine)
    facts: dict[str, Any] = field(default_factory=dict)  # what the student process reported


def problems(report: dict[str, Any], plan: gpu_access.AccessPlan, mode: str, dry: bool) -> list[str]:
    """What is wrong in a preflight ``report`` (from the student process), in words; empty when all is well."""
    found: list[str] = []
    if report.get("cuda_initialized_at_fork"):
        found.append("CUDA was initialised in the grader before the sandbox forked the student process, so the "
                     "student process cannot use the GPU (something touched torch.cuda before start_zygote())")
    if report.get("rlimit_as") is not None:
        found.append(f"the student process has an address-space limit (RLIMIT_AS = {report['rlimit_as']} bytes), "
                     "which stops CUDA from starting: GPU grading must not set memory_bytes")
    if report.get("hidden_folders"):
        found.append("the sandbox hides folders that CUDA loads libraries from (or the MPS pipe folder): "
                     + ", ".join(report["hidden_folders"]))
    closed = [node for node, ok in report.get("nodes", {}).items() if not ok and gpu_access.required(node)]
    if closed:
        found.append(f"the student uid {report.get('uid')} (groups {report.get('groups')}) cannot open "
                     + ", ".join(closed) + ": give the device nodes a group other than root's, or mode 0666")
    if dry:
        return found
    if mode == "PROHIBITED":
        found.append("the GPU's compute mode is PROHIBITED: no process may use it (nvidia-smi -c DEFAULT)")
    cuda = report.get("cuda") or {}
    if "error" in cuda or not cuda.get("available"):
        if report.get("torch_cuda") is None:
            reason = f"this torch ({report.get('torch')}) is built without CUDA; install a CUDA build of torch"
        else:
            reason = cuda.get("error") or "torch.cuda.is_available() is False"
        if mode in gpu_access.EXCLUSIVE:
            reason += (f"; the GPU is in {mode} compute mode, so no other process may hold it while grading "
                       "(nvidia-smi lists the processes using it)")
        found.append(f"CUDA does not work in the sandboxed student process ({reason})")
    elif not cuda.get("matmul_ok"):
        found.append("a 256x256 matmul on the GPU gave a wrong result in the student process")
    return found


def preflight(dry: bool, limits: Any, uid: int | None, hide: Sequence[str], *,
              plan: gpu_access.AccessPlan | None = None, min_isolation: str | None = None) -> Setup:
    """Check the device from a sandboxed student process; return the Setup or raise PreflightFailed.

    ``min_isolation``: the lowest isolation level accepted (a level's name; None: ``$AMP_MIN_ISOLATION``, else the
    sealed level); a GPU student process is sealed only at ``namespaces`` (its built view: ``autograder.sandbox.view``).
    """
    from autograder.sandbox import levels, runner as sandbox
    from checks.runners.harness import SubmissionFault

    if plan is None:
        plan = gpu_access.plan_access([str(sandbox.REPO_ROOT), *hide])
    access = gpu_access.device_access(plan)
    empty = Path(tempfile.mkdtemp(prefix="amp-preflight-"))
    os.chmod(empty, 0o755)
    runner = sandbox.SandboxRunner(empty, limits=limits, hide=tuple(hide), uid=uid, device=access)
    try:
        report = runner.run("gpu_preflight", {"device": "cpu" if dry else "cuda",
                                              "folders": gpu_access.folder_sizes(plan.keep), "nodes": plan.nodes},
                            timeout=PREFLIGHT_SECONDS)
    except SubmissionFault as exc:
        raise PreflightFailed(f"the sandboxed student process could not run the device check: {exc}") from None
    finally:
        runner.close()  # its CUDA context ends before anyone is graded
        shutil.rmtree(empty, ignore_errors=True)
    mode = "n/a" if dry else gpu_access.mode_of(gpu_access.compute_modes(), (report.get("cuda") or {}).get("uuid"))
    report["isolation"] = isolation = runner.isolation or "none"
    refused = levels.refusal(isolation, levels.required_level(min_isolation), gpu=True)
    found = ([refused] if refused else []) + problems(report, plan, mode, dry)
    facts = {**report, "compute_mode": mode, "kept_visible": plan.keep, "not_exposed": plan.refused}
    if found:
        raise PreflightFailed("; ".join(found), facts)
    info = (report.get("cuda") or {}).get("info") or {}
    return Setup(dry=dry, device="cpu" if dry else "cuda",
                 device_name="cpu (dry mode)" if dry else str(info.get("name", "cuda")),
                 compute_mode=mode, exclusive=not dry and mode not in ("DEFAULT",), access=access, isolation=isolation,
                 facts=facts)
