"""The GPU benchmark's timed training runs (``benchmarks/gpu_bench.py``): in-process timings and loss curves.

They run in the benchmark's own process, a trusted one, on the workload of the GPU check 4.1
(:mod:`checks.runners.gpu_runs`: its config, task and model).  No grade reads anything here; the graded
run is :func:`checks.runners.gpu_runs.run_train`, timed by the judge from outside the student's process.

Timing: CUDA events at every step boundary (no per-step sync) on a GPU, ``perf_counter`` on the CPU; the
target loss is read from the smoothed curve after the run.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch

from checks.runners import gpu_runs as g

Json = Any


class StepClock:
    """Timestamps at step boundaries: CUDA events on a GPU, ``perf_counter`` on the CPU.

    Events are recorded on the current stream without synchronising, so timing does
    not stall the GPU; :meth:`elapsed_ms` synchronises once at the end.
    """

    def __init__(self, device: str) -> None:
        self.cuda = g.is_cuda(device)
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
            g.synchronize(self.device)
            return [float(self.marks[0].elapsed_time(event)) for event in self.marks]
        return [(t - self.marks[0]) * 1000.0 for t in self.marks]


def reset_peak_memory(device: str) -> None:
    if g.is_cuda(device):
        torch.cuda.reset_peak_memory_stats(torch.device(device))


def peak_memory(device: str) -> int | None:
    return int(torch.cuda.max_memory_allocated(torch.device(device))) if g.is_cuda(device) else None


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
        self._taken = 0  # private by convention: what it counts decides no point (the judge times and recomputes)

    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        self._taken += 1
        return super().step(closure)


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


def train_once(cfg: dict[str, Json], task: g.SyntheticTask, mode: str, amp_step: Callable[..., Any] | None,
               steps: int) -> dict[str, Json]:
    """One training run from the seed; ``mode`` is "fp32" (plain float32) or "amp" (``amp_step``)."""
    device = cfg["device"]
    model = g.build_model(cfg)
    optimizer = CountingAdam(model.parameters(), lr=g.learning_rate(cfg))
    dtype = getattr(torch, cfg["dtype"])
    scaler = None
    if mode == "amp":  # float16 needs loss scaling; bfloat16 has float32's range (a disabled scaler passes through)
        scaler = g.torch_scaler_factory(device, enabled=dtype == torch.float16)(**cfg.get("scaler_kwargs", {}))
    loss_fn = torch.nn.functional.mse_loss
    clock = StepClock(device)
    losses: list[torch.Tensor] = []
    g.synchronize(device)
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
                            device_type=g.device_type(device), dtype=dtype)
        losses.append(_loss_scalar(loss, device))
        clock.mark()
    elapsed = clock.elapsed_ms()
    wall = time.perf_counter() - started
    values = [float(v) for v in torch.stack(losses).tolist()] if losses else []
    scale = float(scaler.get_scale()) if scaler is not None and scaler.is_enabled() else None
    return {"losses": values, "elapsed_ms": elapsed, "wall_s": wall, "taken": optimizer._taken, "scale": scale}


def run_mode(cfg: dict[str, Json], task: g.SyntheticTask, mode: str, amp_step: Callable[..., Any] | None,
             target: float | None) -> dict[str, Json]:
    """Warm up, then ``repeats`` timed runs from the same seed; medians and the first run's curve.

    Without ``target`` (the fp32 reference) the target is chosen from the first run.
    """
    device, steps, window = cfg["device"], int(cfg["steps"]), int(cfg["window"])
    train_once(cfg, task, mode, amp_step, int(cfg["warmup"]))  # cuBLAS handles, kernels, allocator
    # The warm-up's blocks stay in the caching allocator (no empty_cache() here): emptying it would
    # put cudaMalloc calls inside the timed region.
    g.synchronize(device)
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
