"""``make gpu-check OUT=DIR``: what the first run on a GPU must prove, in one report.

On a machine with CUDA it runs, each as its own process and within a total budget
(:data:`BUDGET_S`, under 8 minutes on one H100/H200):

1. the preflight of ``grade-gpu`` (CUDA in a sandboxed student process, compute mode,
   device nodes, library folders): ``DIR/grade/gpu_preflight.json``;
2. the gpu-marked tests on ``solutions/`` (``pytest -m gpu``, as a student with a GPU
   runs them): ``DIR/gpu_tests.xml`` and their printed timings;
3. ``benchmarks/gpu_bench.py`` (``make bench-gpu``): ``DIR/gpu_bench.json`` and ``.png``;
4. ``grade-gpu`` on ``solutions/`` and ``assignment/`` (canary included): ``DIR/grade/``;

and writes ``DIR/report.md`` and ``DIR/report.json``: device, torch and CUDA versions,
each test's verdict, time to target for fp32 / fp16+GradScaler / bf16, speed-up, peak
memory, fraction of peak FLOP/s.  Without CUDA it prints one line and exits 0;
``--dry 1`` (``make gpu-check DRY=1``) runs every step in the CPU dry mode instead, to
exercise the report on any machine (its numbers mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

from autograder.engine.files import write_text_atomic
from checks.gpu_mode import DRY_ENV, dry_from_env, parse_dry
from autograder import ROOT, settings

BUDGET_S = 440.0  # all steps together (each gets at least 5 s more): under 8 minutes
STEP_CAPS_S = {"preflight": 180.0, "tests": 180.0, "bench": 180.0, "grade": 300.0}
NO_CUDA = ("gpu-check: no CUDA device here (torch.cuda.is_available() is False): nothing to check. Run it on a "
           "GPU machine, or with DRY=1 to exercise it on the CPU.")


def _run(name: str, command: list[str], deadline: float, log: Path, cwd: Path = ROOT,
         env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one step with what is left of the budget; keep its output in ``log``."""
    limit = max(5.0, min(STEP_CAPS_S[name], deadline - time.monotonic()))
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=limit,
                              env={**os.environ, **(env or {})})
        status, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        status = "timeout"
        output = f"{(exc.stdout or b'').decode(errors='replace') if isinstance(exc.stdout, bytes) else exc.stdout or ''}"
        output += f"\n(stopped after {limit:.0f} s)"
    write_text_atomic(log, output)
    return {"step": name, "status": status, "seconds": round(time.monotonic() - started, 1), "log": str(log)}


def test_verdicts(junit: Path) -> list[dict[str, str]]:
    """(test, verdict, first line of its message) from a JUnit XML file."""
    if not junit.is_file():
        return []
    verdicts = []
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        verdict, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            found = case.find(kind)
            if found is not None:
                verdict = "failed" if kind in ("failure", "error") else "skipped"
                message = (found.get("message") or "").strip().splitlines()[0][:300] if found.get("message") else ""
        verdicts.append({"test": case.get("name", ""), "verdict": verdict, "message": message})
    return verdicts


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _gradebook(path: Path) -> list[dict[str, str]]:
    import csv

    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def _fmt(value: Any, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def render(report: dict[str, Any]) -> str:
    """report.md from the collected facts."""
    lines = [f"# GPU check ({'dry mode on the CPU: the numbers mean nothing' if report['dry'] else 'CUDA'})", ""]
    env = report["environment"]
    lines += [f"- Device: {env.get('device', '?')}", f"- torch {env.get('torch')}, CUDA {env.get('cuda')}",
              f"- Compute mode: {env.get('compute_mode', '?')}",
              f"- Preflight: {report['preflight'].get('line', 'did not run')}", f"- Total: {report['seconds']:.0f} s", ""]
    lines += ["## Steps", "", "| step | status | seconds | log |", "|---|---|---|---|"]
    lines += [f"| {s['step']} | {s['status']} | {s['seconds']} | {Path(s['log']).name} |" for s in report["steps"]]
    lines += ["", "## GPU tests on solutions/ (`pytest -m gpu`)", "", "| test | verdict | message |", "|---|---|---|"]
    lines += [f"| {t['test']} | {t['verdict']} | {t['message'].replace('|', '/')} |" for t in report["tests"]]
    if report["speed_lines"]:
        lines += ["", "Test 4.1 measured:", "", "```", *report["speed_lines"], "```"]
    lines += ["", "## Benchmark (`make bench-gpu`)", ""]
    bench = report.get("bench") or {}
    if bench.get("runs"):
        cfg = bench["config"]
        lines += [f"MLP width {cfg['width']}, {cfg['depth']} hidden layers, batch {cfg['batch']}, "
                  f"{bench['flops_per_step'] / 1e12:.3g} TFLOP of matmuls per step; target loss {bench['target']:.4g}.",
                  "", "| mode | ms/step | time to target | speed-up (target) | peak memory | TFLOP/s | of peak |",
                  "|---|---|---|---|---|---|---|"]
        for run in bench["runs"]:
            if "skipped" in run:
                lines.append(f"| {run['label']} | skipped: {run['skipped']} | | | | | |")
                continue
            memory = run.get("peak_memory_bytes")
            ttt = run.get("time_to_target_ms")
            lines.append(f"| {run['label']} | {_fmt(run['median_step_ms'], '.3g')} | {_fmt(ttt and ttt / 1000, '.3g', ' s')}"
                         f" | {_fmt(run.get('speedup_to_target'), '.2f', 'x')} | {_fmt(memory and memory / 2**30, '.2f', ' GiB')}"
                         f" | {_fmt(run.get('tflops'), '.3g')} | {_fmt(run.get('peak_fraction') and 100 * run['peak_fraction'], '.0f', ' %')} |")
        lines += ["", "![loss vs time](gpu_bench.png)"]
    else:
        lines.append("The benchmark did not finish: see its log.")
    lines += ["", "## grade-gpu on solutions/ and assignment/", "", "| submission | GPU score | status |", "|---|---|---|"]
    lines += [f"| {row.get('submission')} | {row.get('gpu_score') or '-'} / {row.get('gpu_max')} | {row.get('gpu_status')} |"
              for row in report["gradebook"]]
    return "\n".join(lines) + "\n"


def check(out: Path, dry: bool) -> int:
    started = time.monotonic()
    deadline = started + BUDGET_S
    out = out.resolve()  # the tests step runs in assignment/: a relative --out would put its XML there
    out.mkdir(parents=True, exist_ok=True)
    flag = ["--dry", "1" if dry else "0"]
    py = sys.executable
    grade_out = out / "grade"
    steps = [_run("preflight", [py, "-m", "autograder", "grade-gpu", "solutions", "--preflight-only",
                                "--out", str(grade_out), *flag], deadline, out / "preflight.log")]
    preflight = _read_json(grade_out / "gpu_preflight.json") or {}
    if preflight.get("ok"):
        steps.append(_run("tests", [py, "-m", "pytest", "-m", "gpu", "checks/test_gpu.py", "-s", "-q", "-rA",
                                    "-p", "no:cacheprovider", f"--junitxml={out / 'gpu_tests.xml'}"],
                          deadline, out / "tests.log", cwd=ROOT / "assignment",
                          env={settings.SUBMISSION.env: str(ROOT / "solutions"), DRY_ENV: flag[1]}))
        steps.append(_run("bench", [py, "benchmarks/gpu_bench.py", "--plot", str(out / "gpu_bench.png"),
                                    "--json", str(out / "gpu_bench.json"), *flag], deadline, out / "bench.log"))
        steps.append(_run("grade", [py, "-m", "autograder", "grade-gpu", "solutions", "assignment", "--force",
                                    "--out", str(grade_out), *flag], deadline, out / "grade.log"))
    tests_log = (out / "tests.log").read_text(encoding="utf-8") if (out / "tests.log").is_file() else ""
    bench = _read_json(out / "gpu_bench.json") or {}
    import torch

    info = (preflight.get("facts") or {}).get("cuda", {}).get("info") or bench.get("device_info") or {}
    report = {
        "dry": dry, "seconds": round(time.monotonic() - started, 1), "steps": steps, "preflight": preflight,
        "environment": {"device": preflight.get("device") or info.get("name"), "torch": torch.__version__,
                        "cuda": torch.version.cuda, "compute_mode": preflight.get("compute_mode"),
                        "capability": info.get("capability"), "memory_gib": info.get("memory_gib")},
        "tests": test_verdicts(out / "gpu_tests.xml"),
        "speed_lines": [line for line in tests_log.splitlines()
                        if line.startswith(("Measured by the grader", "run ", "Speed-up"))],
        "bench": bench, "gradebook": _gradebook(grade_out / "gpu_gradebook.csv"),
    }
    write_text_atomic(out / "report.json", json.dumps(report, indent=1, default=str) + "\n")
    write_text_atomic(out / "report.md", render(report))
    failed = [s["step"] for s in steps if s["status"] != 0]
    print(f"gpu-check: wrote {out / 'report.md'} in {report['seconds']:.0f} s"
          + (f"; steps that failed: {', '.join(failed)} (see their logs)" if failed else "; every step passed"))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.gpu.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("out/gpu-check"), help="report folder (default: out/gpu-check)")
    parser.add_argument("--dry", nargs="?", const="1", default=None, metavar="VALUE",
                        help="run every step in the CPU dry mode (1/true/yes); 0/false/no: the real run "
                             "(default: $AMP_GPU_DRY, else real)")
    args = parser.parse_args(argv)
    try:
        dry = dry_from_env() if args.dry is None else parse_dry(args.dry)
    except ValueError as exc:
        parser.error(str(exc))
    if not dry:
        import torch

        if not torch.cuda.is_available():  # this process forks nothing: its own CUDA state does not matter
            print(NO_CUDA)
            return 0
    return check(args.out, dry)


if __name__ == "__main__":
    sys.exit(main())
