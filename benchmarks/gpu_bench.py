"""AMP on a GPU: float32 (TF32 off) vs float16 + GradScaler vs bfloat16.  ``make bench-gpu``.

One matmul-bound wide MLP (the workload of the GPU check 4.1, larger), the same data
and seed in every mode.  For each mode it prints the time per step, the time to reach
a target loss (one the float32 run reaches), the speed-up over float32, peak memory,
achieved TFLOP/s and that as a fraction of the device's peak (a table of known GPUs;
"unknown" otherwise), and writes a loss-versus-wall-time PNG.  Under three minutes on
one modern GPU; ``--dry`` runs a tiny version on the CPU (no meaningful timings).

The AMP modes use ``amp_step`` from ``--submission`` (default: the reference solution).
Timing: warm-up steps first, CUDA events at every step boundary (no per-step sync),
a fixed pool of batches built beforehand, the target read from the loss curve after
the run (a running mean over 5 steps), median of ``--repeats`` runs.

Usage:  python benchmarks/gpu_bench.py [--preset auto|large|small] [--plot out/gpu_bench.png]
        [--json out/gpu_bench.json] [--dry [VALUE]]   (VALUE: 1/true/yes dry, 0/false/no real)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "assignment"))

import torch  # noqa: E402

from checks.runners import gpu_runs as g  # noqa: E402
from checks.runners import harness  # noqa: E402
import gpu_timing as t  # noqa: E402
from checks.gpu_mode import dry_from_env, parse_dry  # noqa: E402

#: Dense peak TFLOP/s by device name (first match wins): (name part, fp16/bf16 tensor cores with
#: float32 accumulation, plain float32 without TF32; None where the GPU has no bf16 tensor cores).
PEAKS: tuple[tuple[str, float, float | None, float], ...] = (
    # name,       fp16,  bf16,  fp32
    ("GH200", 989.0, 989.0, 67.0),
    ("H200", 989.0, 989.0, 67.0),
    ("H100 NVL", 835.0, 835.0, 60.0),
    ("H100 PCIe", 756.0, 756.0, 51.0),
    ("H100", 989.0, 989.0, 67.0),
    ("A100", 312.0, 312.0, 19.5),
    ("L40S", 362.0, 362.0, 91.6),
    ("L4", 121.0, 121.0, 30.3),
    ("T4", 65.0, None, 8.1),
    ("V100", 125.0, None, 15.7),
)

PRESETS: dict[str, dict[str, Any]] = {
    # ~12 TFLOP per step: ~0.25 s in float32 on an H100/H200, ~20 ms with float16 tensor cores.
    "large": {"width": 8192, "depth": 4, "d_out": 512, "teacher_width": 512, "batch": 8192, "pool": 4,
              "steps": 120, "warmup": 3, "repeats": 1},
    # The GPU check's workload (~1.1 TFLOP per step) for 16-24 GB cards (T4, L4).
    "small": {"width": 4096, "depth": 3, "d_out": 256, "teacher_width": 256, "batch": 4096, "pool": 4,
              "steps": 120, "warmup": 3, "repeats": 1},
}
MODES = (("fp32", "fp32 (TF32 off)", "float32"), ("amp", "fp16 + GradScaler", "float16"),
         ("amp", "bf16", "bfloat16"))


def peaks(name: str) -> dict[str, float | None]:
    for part, fp16, bf16, fp32 in PEAKS:
        if part.lower() in name.lower():
            return {"float16": fp16, "bfloat16": bf16, "float32": fp32}
    return {}


def pick_preset(device: str, preset: str) -> dict[str, Any]:
    if not g.is_cuda(device):
        return {"steps": 40, "warmup": 1, "repeats": 1}
    if preset != "auto":
        return PRESETS[preset]
    props = torch.cuda.get_device_properties(torch.device(device))
    fp32 = peaks(props.name).get("float32")
    small = props.total_memory < 30 * 2**30 or (fp32 is not None and fp32 < 30)
    return PRESETS["small" if small else "large"]


def bench(device: str, preset: str, submission: Path, repeats: int | None) -> dict[str, Any]:
    amp_step = harness.Submission(submission).attribute("amp_step")
    cfg = g.speed_config(device, **pick_preset(device, preset))
    if repeats:
        cfg["repeats"] = repeats
    started = time.perf_counter()
    info = g.device_info(device)
    tf32 = g.disable_tf32()
    task = g.SyntheticTask(cfg)
    known = peaks(info["name"]) if g.is_cuda(device) else {}
    runs: list[dict[str, Any]] = []
    target = None
    for mode, label, dtype in MODES:
        if dtype == "bfloat16" and g.is_cuda(device) and not torch.cuda.is_bf16_supported(including_emulation=False):
            runs.append({"label": label, "dtype": dtype, "skipped": "no bfloat16 tensor cores on this GPU"})
            continue
        mode_cfg = {**cfg, "dtype": dtype if mode == "amp" else cfg["dtype"]}
        result = t.run_mode(mode_cfg, task, mode, amp_step if mode == "amp" else None, target)
        target = result["target"]
        peak = known.get(dtype)
        result.update(label=label, dtype=dtype, peak_tflops=peak,
                      peak_fraction=(result["tflops"] / peak) if peak and result["tflops"] else None)
        runs.append(result)
    baseline = runs[0]
    for run in runs:
        if "skipped" in run:
            continue
        ok = baseline["time_to_target_ms"] and run["time_to_target_ms"]
        run["speedup_to_target"] = baseline["time_to_target_ms"] / run["time_to_target_ms"] if ok else None
        run["speedup_per_step"] = baseline["median_step_ms"] / run["median_step_ms"]
    return {"device_info": info, "tf32": tf32, "config": cfg, "target": target, "runs": runs,
            "flops_per_step": t.matmul_flops_per_step(cfg), "data_bytes": task.bytes,
            "seconds": time.perf_counter() - started}


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    info, cfg = report["device_info"], report["config"]
    console = Console(width=140)
    console.print(f"[bold]Device[/]: {info['name']}   torch {info['torch']}   CUDA {info['cuda']}")
    console.print(f"[bold]Baseline[/]: {report['tf32']['text']}; float32 is plain IEEE float32 (no tensor cores).")
    console.print(f"[bold]Workload[/]: MLP width {cfg['width']}, {cfg['depth']} hidden layers, batch {cfg['batch']}, "
                  f"Adam, {cfg['steps']} steps x {cfg['repeats']} run(s) after {cfg['warmup']} warm-up steps; "
                  f"{report['flops_per_step'] / 1e12:.3g} TFLOP of matmuls per step; target loss "
                  f"{report['target']:.4g} (what float32 reaches, running mean of {cfg['window']}).")
    table = Table(title="AMP vs float32")
    for column in ("mode", "ms/step", "time to target", "speed-up (target)", "speed-up (step)", "peak memory",
                   "TFLOP/s", "of peak", "final loss", "skipped steps"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for run in report["runs"]:
        if "skipped" in run:
            table.add_row(run["label"], *(["-"] * 8), run["skipped"])
            continue
        memory = run["peak_memory_bytes"]
        table.add_row(
            run["label"], _fmt(run["median_step_ms"], ".3g"), _fmt(run["time_to_target_ms"] and
                                                                   run["time_to_target_ms"] / 1000, ".3g", " s"),
            _fmt(run.get("speedup_to_target"), ".2f", "x"), _fmt(run.get("speedup_per_step"), ".2f", "x"),
            _fmt(memory and memory / 2**30, ".2f", " GiB"), _fmt(run["tflops"], ".3g"),
            _fmt(run["peak_fraction"] and 100 * run["peak_fraction"], ".0f", " %") if run["peak_tflops"] else "unknown",
            _fmt(run["final_loss"], ".4g"), str(run["skipped_steps"]))
    console.print(table)
    fp16 = next((r for r in report["runs"] if r.get("dtype") == "float16"), None)
    if fp16 and fp16.get("speedup_to_target"):
        console.print(f"float16 + GradScaler reached the target {fp16['speedup_to_target']:.2f}x sooner than float32 "
                      f"(goal on an H200-class GPU: at least 5x).")
    console.print(f"Total {report['seconds']:.0f} s.")


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    window = report["config"]["window"]
    fig, (by_time, by_step) = plt.subplots(1, 2, figsize=(12, 4.5))
    for run in report["runs"]:
        if "skipped" in run:
            continue
        curve = t.smoothed(run["losses"], window)
        seconds = [ms / 1000 for ms in run["elapsed_ms"][1:]]
        by_time.plot(seconds, curve, label=run["label"])
        by_step.plot(range(1, len(curve) + 1), curve, label=run["label"])
    for axes, xlabel in ((by_time, "wall-clock time (s)"), (by_step, "step")):
        axes.axhline(report["target"], color="grey", linestyle="--", linewidth=1, label="target")
        axes.set_xlabel(xlabel)
        axes.set_ylabel(f"training loss (running mean of {window})")
        axes.grid(alpha=0.3)
        axes.legend()
    by_time.set_title(f"Loss vs wall time on {report['device_info']['name']}")
    by_step.set_title("Loss vs step (same trajectory in every mode)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry", nargs="?", const="1", default=None, metavar="VALUE",
                        help="tiny run on the CPU (exercises the code; timings mean nothing); --dry 0/false/no: the "
                             "real GPU run (default: $AMP_GPU_DRY, else real)")
    parser.add_argument("--preset", choices=("auto", "large", "small"), default="auto",
                        help="workload size (auto: small on GPUs under 30 GB or with slow float32)")
    parser.add_argument("--repeats", type=int, help="timed runs per mode (median; default 1)")
    parser.add_argument("--submission", type=Path, default=ROOT / "solutions", help="folder with amp_step.py")
    parser.add_argument("--plot", type=Path, default=ROOT / "out" / "gpu_bench.png", help="PNG to write")
    parser.add_argument("--json", type=Path, help="also write the measurements as JSON")
    args = parser.parse_args(argv)
    try:
        dry = dry_from_env() if args.dry is None else parse_dry(args.dry)
    except ValueError as exc:
        parser.error(str(exc))
    if dry:
        device = "cpu"
    elif torch.cuda.is_available():
        device = "cuda"
    else:
        print("error: no CUDA device (torch.cuda.is_available() is False); use --dry for a CPU dry run.",
              file=sys.stderr)
        return 2
    report = bench(device, args.preset, args.submission, args.repeats)
    print_report(report)
    plot(report, args.plot)
    print(f"Wrote {args.plot}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
        print(f"Wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
