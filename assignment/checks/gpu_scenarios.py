"""GPU scenarios (Part 4): plain data in, plain data out, like :mod:`checks.harness`.

Three scenarios check the lesson's promise on a real GPU with the student's own code:

* ``gpu_speed``: the same model, data and seed trained in float32 (TF32 *off*) and
  with the student's ``amp_step`` + ``torch.amp.GradScaler``; reports the time each
  run takes to reach a target loss, per-step times, final losses, peak memory...
* ``gpu_underflow``: the underflow task of :func:`checks.probes.run_underflow` on the
  device, through the student's ``amp_step`` with torch's ``GradScaler``;
* ``gpu_scaler_ops``: :func:`checks.harness.run_scaler_ops` on CUDA tensors, against
  the student's ``ToyLossScaler`` (the judge compares with ``GradScaler("cuda")``).

Every scenario takes ``args["device"]``: ``"cuda"`` for the real thing, ``"cpu"`` for
the *dry mode* (``AMP_GPU_DRY=1``) that runs the same code paths on the CPU with tiny
sizes (CPU autocast, float16 or bfloat16) and without any speed claim.

Grader faults: a device failure (CUDA could not start, out of memory, "CUDA error") raised
outside the student's own frames -- building the synthetic task, moving data to the GPU,
reading the device's properties -- is the grader machine's failure, not the student's:
:func:`run_scenario` answers ``{"grader_fault": ...}`` with the full traceback, and the
judge marks the submission "could not be graded" (see ``autograder.gpu.grading``).

Fork safety: nothing here touches CUDA at import time.  The sandbox's zygote
preloads this module and forks student processes from it; a process that initialised
CUDA before forking cannot use it in the child.  Only torch and the standard library
are imported (no pytest), as for the harness.

Why one file of ~520 lines: it is everything the student process runs for the GPU part (preflight,
timed runs, underflow, dry mode), preloaded into the zygote as one module; splitting it would add
modules the sandbox must preload and keep in step.
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import statistics
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable

import torch

from checks import harness, probes, registry
from checks.gpu_mode import DRY_ENV, dry_from_env  # noqa: F401 - DRY_ENV: this module's API since the start

Json = Any

#: The timed workload on a GPU: a matmul-bound wide MLP sized for tensor cores (every
#: dimension a multiple of 64), trained with Adam.  ~1.1 TFLOP of matmuls per step: ~22 ms
#: in fp32 (TF32 off) on an H100, a few ms with fp16 autocast; the fp32 reference and the
#: AMP runs together take well under a minute there, and a few minutes on a T4.
SPEED_CUDA: dict[str, Json] = {
    "width": 4096, "depth": 3, "d_out": 256, "teacher_width": 256, "batch": 4096, "pool": 8,
    "steps": 150, "warmup": 5, "repeats": 3, "lr": 2e-4, "seed": 0,
    "dtype": "float16", "window": 5, "target_fraction": 0.8, "scaler_kwargs": {},
}
#: The dry mode: the same code on the CPU, tiny.
SPEED_DRY: dict[str, Json] = {
    **SPEED_CUDA, "width": 64, "depth": 2, "d_out": 8, "teacher_width": 8, "batch": 64, "pool": 4,
    "steps": 40, "warmup": 2, "repeats": 2, "lr": 2e-3,
}


class GraderFault(RuntimeError):
    """The grader's side of a GPU check failed (raised in the judge): the submission is not graded."""


def dry_mode() -> bool:
    """True when ``AMP_GPU_DRY`` asks for the CPU dry run of the GPU checks (see :mod:`checks.gpu_mode`)."""
    return dry_from_env()


def device_type(device: str) -> str:
    """``torch.autocast``'s device_type for a device string ("cuda:0" -> "cuda")."""
    return torch.device(device).type


def is_cuda(device: str) -> bool:
    return device_type(device) == "cuda"


def speed_config(device: str, **overrides: Json) -> dict[str, Json]:
    """The speed workload for ``device`` (CUDA sizes or the tiny dry ones), with overrides."""
    base = SPEED_CUDA if is_cuda(device) else SPEED_DRY
    return {**base, "device": device, **overrides}


# --------------------------------------------------------------------------- device facts


def disable_tf32() -> dict[str, Json]:
    """Make float32 matmuls true float32 (no TF32 tensor cores) and say what is now set.

    ``torch.set_float32_matmul_precision("highest")`` keeps the legacy ``allow_tf32``
    flag and the newer ``fp32_precision`` setting consistent (reading one after setting
    the other inconsistently raises in torch >= 2.9), so only that call is used.  The
    model has no convolutions, so cuDNN's TF32 flag does not matter.
    """
    torch.set_float32_matmul_precision("highest")
    state: dict[str, Json] = {"float32_matmul_precision": torch.get_float32_matmul_precision(), "tf32": False}
    try:
        state["cuda_matmul_fp32_precision"] = str(torch.backends.cuda.matmul.fp32_precision)
    except (AttributeError, RuntimeError):  # older torch: no new-style setting
        pass
    state["text"] = "TF32 off for float32 matmuls (torch.set_float32_matmul_precision('highest'))"
    return state


def device_info(device: str) -> dict[str, Json]:
    """Name and facts of ``device`` (initialises CUDA when it is a CUDA device)."""
    info: dict[str, Json] = {"device": device, "torch": torch.__version__, "cuda": torch.version.cuda}
    if is_cuda(device):
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(name=props.name, capability=f"{props.major}.{props.minor}",
                    memory_gib=round(props.total_memory / 2**30, 1), sms=props.multi_processor_count)
    else:
        info.update(name=f"CPU ({platform.processor() or platform.machine()}, dry mode)",
                    threads=torch.get_num_threads())
    return info


def synchronize(device: str) -> None:
    if is_cuda(device):
        torch.cuda.synchronize(torch.device(device))


class StepClock:
    """Timestamps at step boundaries: CUDA events on a GPU, ``perf_counter`` on the CPU.

    Events are recorded on the current stream without synchronising, so timing does
    not stall the GPU; :meth:`elapsed_ms` synchronises once at the end.
    """

    def __init__(self, device: str) -> None:
        self.cuda = is_cuda(device)
        self.device = device
        self.marks: list[Any] = []

    def mark(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def elapsed_ms(self) -> list[float]:
        """Milliseconds from the first mark to each mark."""
        if self.cuda:
            synchronize(self.device)
            return [float(self.marks[0].elapsed_time(event)) for event in self.marks]
        return [(t - self.marks[0]) * 1000.0 for t in self.marks]


def reset_peak_memory(device: str) -> None:
    if is_cuda(device):
        torch.cuda.reset_peak_memory_stats(torch.device(device))


def peak_memory(device: str) -> int | None:
    return int(torch.cuda.max_memory_allocated(torch.device(device))) if is_cuda(device) else None


def release_memory(device: str) -> None:
    if is_cuda(device):
        synchronize(device)
        torch.cuda.empty_cache()


def torch_scaler_factory(device: str, enabled: bool = True) -> Callable[..., torch.amp.GradScaler]:
    """Makes ``torch.amp.GradScaler(device_type)`` initialised eagerly on ``device`` (see harness.torch_scaler)."""

    def make(**kwargs: Json) -> torch.amp.GradScaler:
        scaler = torch.amp.GradScaler(device_type(device), enabled=enabled, **kwargs)
        if enabled:
            scaler._lazy_init_scale_growth_tracker(torch.device(device))
        return scaler

    return make


# --------------------------------------------------------------------------- the speed workload


class SyntheticTask:
    """Regression onto a random teacher ``tanh(x A) B``: a fixed pool of batches on the device.

    Everything is drawn from ``cfg["seed"]`` on the device and built before any timing,
    so every run (fp32 or AMP, in any process) sees the same batches, and no data is
    made or copied inside the timed loop.  Step ``i`` uses batch ``i % pool``.
    """

    def __init__(self, cfg: dict[str, Json]) -> None:
        device = cfg["device"]
        generator = torch.Generator(device=device).manual_seed(int(cfg["seed"]))
        d_in, hidden, d_out = int(cfg["width"]), int(cfg["teacher_width"]), int(cfg["d_out"])
        a = torch.randn(d_in, hidden, generator=generator, device=device) / math.sqrt(d_in)
        b = torch.randn(hidden, d_out, generator=generator, device=device) / math.sqrt(hidden)
        self.inputs = [torch.randn(int(cfg["batch"]), d_in, generator=generator, device=device)
                       for _ in range(int(cfg["pool"]))]
        targets = [torch.tanh(x @ a) @ b for x in self.inputs]
        scale = torch.cat([t.reshape(-1) for t in targets]).std()
        self.targets = [t / scale for t in targets]
        self.bytes = sum(t.numel() * t.element_size() for t in self.inputs + self.targets)

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        index = step % len(self.inputs)
        return self.inputs[index], self.targets[index]


def build_model(cfg: dict[str, Json]) -> torch.nn.Sequential:
    """The wide MLP ``width -> width x depth -> d_out`` (ReLU), float32, initialised from the seed."""
    torch.manual_seed(int(cfg["seed"]) + 1)
    width, depth, d_out = int(cfg["width"]), int(cfg["depth"]), int(cfg["d_out"])
    sizes = [width] * (depth + 1) + [d_out]
    layers: list[torch.nn.Module] = []
    with torch.device(cfg["device"]):
        for index, (a, b) in enumerate(zip(sizes, sizes[1:])):
            layers.append(torch.nn.Linear(a, b))
            if index + 2 < len(sizes):
                layers.append(torch.nn.ReLU())
        return torch.nn.Sequential(*layers)


def matmul_flops_per_step(cfg: dict[str, Json]) -> float:
    """Matmul FLOPs of one training step: 2 per multiply-add forward, 2 for the weight gradient, and
    2 for the input gradient of every layer but the first (nothing needs the gradient of the data)."""
    width, depth, d_out, batch = (int(cfg[k]) for k in ("width", "depth", "d_out", "batch"))
    layers = depth * width * width + width * d_out  # multiply-adds per example, summed over the layers
    return 2.0 * batch * (3 * layers - width * width)


class CountingAdam(torch.optim.Adam):
    """Adam that counts the steps it really takes (GradScaler skips some)."""

    def __init__(self, params: Any, lr: float) -> None:
        super().__init__(params, lr=lr)
        self._taken = 0  # private: code under test may not touch it (static rules)

    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        self._taken += 1
        return super().step(closure)


def learning_rate(cfg: dict[str, Json]) -> float:
    """Adam's rate: ``cfg["lr"]`` at width 1024, scaled by sqrt(1024 / width) (tuned at 64-2048)."""
    return float(cfg["lr"]) * math.sqrt(1024 / int(cfg["width"]))


def _loss_scalar(loss: Any, device: str) -> torch.Tensor:
    """A 0-d float32 tensor on ``device`` from what a training step returned (no sync for tensors)."""
    if isinstance(loss, torch.Tensor):
        if loss.numel() != 1:
            raise TypeError(f"amp_step returned a tensor with {loss.numel()} elements; "
                            "it should return the scalar loss")
        return loss.detach().reshape(()).to(device=device, dtype=torch.float32)
    if isinstance(loss, (int, float)) and not isinstance(loss, bool):
        return torch.tensor(float(loss), device=device)
    raise TypeError(f"amp_step returned {type(loss).__name__}; it should return the loss tensor")


def smoothed(losses: list[float], window: int) -> list[float]:
    """Running mean over the last ``window`` losses (fresh batches make single losses noisy)."""
    out, total = [], 0.0
    for index, value in enumerate(losses):
        total += value
        if index >= window:
            total -= losses[index - window]
        out.append(total / min(index + 1, window))
    return out


def choose_target(losses: list[float], window: int, fraction: float) -> float:
    """A loss the run reaches: ``fraction`` of the way from its first to its best smoothed loss."""
    curve = smoothed(losses, window)
    return curve[0] - fraction * (curve[0] - min(curve))


def reach(losses: list[float], elapsed_ms: list[float], target: float, window: int) -> tuple[int | None, float | None]:
    """(steps, milliseconds) until the smoothed loss first reaches ``target``; (None, None) if never."""
    for index, value in enumerate(smoothed(losses, window)):
        if value <= target:
            return index + 1, elapsed_ms[index + 1]
    return None, None


def train_once(cfg: dict[str, Json], task: SyntheticTask, mode: str, amp_step: Callable[..., Any] | None,
               steps: int) -> dict[str, Json]:
    """One training run from the seed; ``mode`` is "fp32" (plain float32) or "amp" (``amp_step``)."""
    device = cfg["device"]
    model = build_model(cfg)
    optimizer = CountingAdam(model.parameters(), lr=learning_rate(cfg))
    dtype = getattr(torch, cfg["dtype"])
    scaler = None
    if mode == "amp":  # float16 needs loss scaling; bfloat16 has float32's range (a disabled scaler passes through)
        scaler = torch_scaler_factory(device, enabled=dtype == torch.float16)(**cfg.get("scaler_kwargs", {}))
    loss_fn = torch.nn.functional.mse_loss
    clock = StepClock(device)
    losses: list[torch.Tensor] = []
    synchronize(device)
    started = time.perf_counter()
    clock.mark()
    for step in range(steps):
        inputs, targets = task.batch(step)
        if mode == "fp32":
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
        else:
            assert amp_step is not None
            loss = amp_step(model, inputs, targets, loss_fn, optimizer, scaler,
                            device_type=device_type(device), dtype=dtype)
        losses.append(_loss_scalar(loss, device))
        clock.mark()
    elapsed = clock.elapsed_ms()
    wall = time.perf_counter() - started
    values = [float(v) for v in torch.stack(losses).tolist()] if losses else []
    scale = float(scaler.get_scale()) if scaler is not None and scaler.is_enabled() else None
    return {"losses": values, "elapsed_ms": elapsed, "wall_s": wall, "taken": optimizer._taken, "scale": scale}


def run_mode(cfg: dict[str, Json], task: SyntheticTask, mode: str, amp_step: Callable[..., Any] | None,
             target: float | None) -> dict[str, Json]:
    """Warm up, then ``repeats`` timed runs from the same seed; medians and the first run's curve.

    Without ``target`` (the fp32 reference) the target is chosen from the first run.
    """
    device, steps, window = cfg["device"], int(cfg["steps"]), int(cfg["window"])
    train_once(cfg, task, mode, amp_step, int(cfg["warmup"]))  # cuBLAS handles, kernels, allocator
    # The warm-up's blocks stay in the caching allocator (no empty_cache() here): emptying it would
    # put cudaMalloc calls inside the timed region.  run_speed releases the memory at the very end.
    synchronize(device)
    reset_peak_memory(device)
    runs = [train_once(cfg, task, mode, amp_step, steps) for _ in range(int(cfg["repeats"]))]
    first = runs[0]
    if target is None:
        target = choose_target(first["losses"], window, float(cfg["target_fraction"]))
    reached = [reach(run["losses"], run["elapsed_ms"], target, window) for run in runs]
    times = [ms for _, ms in reached if ms is not None]
    step_ms = [b - a for a, b in zip(first["elapsed_ms"], first["elapsed_ms"][1:])]
    all_step_ms = [b - a for run in runs for a, b in zip(run["elapsed_ms"], run["elapsed_ms"][1:])]
    curve = smoothed(first["losses"], window)
    median_step = statistics.median(all_step_ms) if all_step_ms else None
    flops = matmul_flops_per_step(cfg)
    return {
        "mode": mode,
        "dtype": "float32" if mode == "fp32" else cfg["dtype"],
        "target": target,
        "time_to_target_ms": statistics.median(times) if len(times) * 2 > len(runs) else None,
        "time_to_target_each_ms": [ms for _, ms in reached],
        "steps_to_target": reached[0][0],
        "median_step_ms": median_step,
        "step_ms": step_ms,
        "elapsed_ms": first["elapsed_ms"],
        "losses": first["losses"],
        "initial_loss": first["losses"][0] if first["losses"] else None,
        "final_loss": curve[-1] if curve else None,
        "best_loss": min(curve) if curve else None,
        "wall_s": [run["wall_s"] for run in runs],
        "skipped_steps": steps - first["taken"],
        "final_scale": first["scale"],
        "peak_memory_bytes": peak_memory(device),
        "tflops": flops / (median_step * 1e9) if median_step else None,
    }


def run_speed(args: dict[str, Json], amp_step: Callable[..., Any] | None,
              root: Path | None = None) -> dict[str, Json]:
    """The speed scenario: ``args["modes"]`` (default both) on one shared task.

    Args: the keys of :data:`SPEED_CUDA` plus ``device``, ``modes`` (a list of "fp32"
    and "amp") and ``target`` (the loss to reach; by default the fp32 run's choice).
    Each mode's entry is its report, or ``{"error": ...}`` if the student's code raised.
    """
    cfg = speed_config(args.get("device", "cuda"),
                       **{k: v for k, v in args.items() if k not in ("device", "modes", "target")})
    device = cfg["device"]
    previous = torch.get_float32_matmul_precision()
    result: dict[str, Json] = {"config": cfg, "device_info": device_info(device), "tf32": disable_tf32(),
                               "flops_per_step": matmul_flops_per_step(cfg)}
    try:
        task = SyntheticTask(cfg)
        result["data_bytes"] = task.bytes
        target = args.get("target")
        for mode in args.get("modes", ["fp32", "amp"]):
            outcome = harness.guarded(lambda: run_mode(cfg, task, mode, amp_step, target), root)
            result[mode] = outcome.get("ok", outcome)
            if target is None and mode == "fp32" and "ok" in outcome:
                target = outcome["ok"]["target"]
        result["target"] = target
        del task
    finally:
        release_memory(device)
        torch.set_float32_matmul_precision(previous)
    return result


_REFERENCES: dict[str, dict[str, Json]] = {}


def reference_fp32(cfg: dict[str, Json]) -> dict[str, Json]:
    """The fp32 run of ``cfg`` in *this* (trusted) process, cached: it never runs student code."""
    key = json.dumps(cfg, sort_keys=True)
    if key not in _REFERENCES:
        _REFERENCES[key] = run_speed({**cfg, "modes": ["fp32"]}, None)
    return _REFERENCES[key]


# --------------------------------------------------------------------------- underflow and scaler ops


def underflow_args(device: str, **overrides: Json) -> dict[str, Json]:
    """The underflow task of the hidden CPU check, on ``device``."""
    return {"device": device, "device_type": device_type(device), "steps": 200,
            "scaler_kwargs": {"growth_interval": 20}, **overrides}


def run_gpu_underflow(args: dict[str, Json], amp_step: Callable[..., Any] | None,
                      root: Path | None = None) -> dict[str, Json]:
    """The underflow task on ``args["device"]``: with ``amp_step`` through ``GradScaler(device)``,
    without it the unscaled baseline."""
    device = args.get("device", "cuda")
    args = {**args, "device": device, "device_type": device_type(device)}
    make = torch_scaler_factory(device) if amp_step is not None else None
    with warnings.catch_warnings():  # the baseline reads float(loss) of a tensor that requires grad
        warnings.filterwarnings("ignore", message="Converting a tensor with requires_grad=True to a scalar")
        run = probes.run_underflow(args, amp_step, make, root)
    return {**run, "device_info": device_info(device)}


def torch_scaler_ops(args: dict[str, Json]) -> list[Json]:
    """What ``torch.amp.GradScaler`` on ``args["world"]["device"]`` does for the ops (the reference)."""
    return harness.run_scaler_ops(args, torch_scaler_factory(args["world"].get("device", "cpu")))


# --------------------------------------------------------------------------- preflight


def _entries(folder: str) -> int:
    try:
        return len(os.listdir(folder))
    except OSError:
        return -1


def run_preflight(args: dict[str, Json]) -> dict[str, Json]:
    """What a student process sees of the GPU (no student code runs; see ``autograder.gpu.preflight``).

    Args: ``device`` ("cuda", or "cpu" in dry mode), ``folders`` (path -> entries the trusted
    side sees: each must be as full here), ``nodes`` (device nodes to open read-write).
    """
    soft_as = resource.getrlimit(resource.RLIMIT_AS)[0]
    bad_fork = getattr(torch.cuda, "_is_in_bad_fork", lambda: False)
    report: dict[str, Json] = {
        "uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()),
        "rlimit_as": None if soft_as == resource.RLIM_INFINITY else soft_as,
        "hidden_folders": sorted(path for path, size in args.get("folders", {}).items() if _entries(path) < size),
        "nodes": {node: os.access(node, os.R_OK | os.W_OK) for node in args.get("nodes", [])},
        # Forked from a zygote that had initialised CUDA, this process could not use the GPU at all.
        "cuda_initialized_at_fork": bool(torch.cuda.is_initialized() or bad_fork()),
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
    }
    device = args.get("device", "cuda")
    if not is_cuda(device):
        return report
    cuda: dict[str, Json] = {"available": bool(torch.cuda.is_available())}
    try:  # even when is_available() says no, the first allocation gives the driver's own reason
        x = torch.ones(256, 256, device=device)
        cuda["matmul_ok"] = float((x @ x).sum()) == 256.0 ** 3
        cuda["info"] = device_info(device)
        cuda["uuid"] = str(getattr(torch.cuda.get_device_properties(torch.device(device)), "uuid", ""))
    except Exception as exc:  # noqa: BLE001 - reported, not raised: the preflight explains it
        cuda["error"] = f"{type(exc).__name__}: {exc}"[:1000]
    report["cuda"] = cuda
    return report


# --------------------------------------------------------------------------- dispatch


def grader_fault(exc: BaseException) -> dict[str, Json]:
    """The reply for a failure of the grader's side: the full traceback, for staff only."""
    with harness.trusted_section():  # the grader's guard refuses traceback frames to student code
        trace = "".join(traceback.format_exception(exc))[-8000:]
    return {"grader_fault": {"type": type(exc).__name__, "message": str(exc)[:2000], "trace": trace}}


def run_scenario(name: str, args: dict[str, Json], submission: harness.Submission) -> Json:
    """Run GPU scenario ``name`` against ``submission`` (registered with :mod:`checks.registry`).

    A device failure outside the student's frames answers ``{"grader_fault": ...}`` (see the
    module's docstring); the student's own exceptions are data, as everywhere else.
    """
    root = submission.root
    try:
        if name == "gpu_preflight":
            return run_preflight(args)
        if name == "gpu_scaler_ops":
            return harness.run_scaler_ops(args, submission.attribute("loss_scaler"), root)
        if name == "gpu_speed":
            return run_speed(args, submission.attribute("amp_step"), root)
        if name == "gpu_underflow":
            return run_gpu_underflow(args, submission.attribute("amp_step"), root)
    except harness.GraderSideError as exc:
        return grader_fault(exc.__cause__ or exc)
    except harness.SubmissionFault:
        raise
    except Exception as exc:
        if harness.is_device_failure(exc) and not harness.submission_frames(exc, root):
            return grader_fault(exc)
        raise
    raise ValueError(f"unknown scenario {name!r}")


registry.register_family("gpu_", run_scenario)
