"""The trusted references of the GPU checks, computed apart from the student's process.

The GPU checks compare the student's runs with torch's own: the unscaled float16 baseline
that must stall (4.2), each step of the student's 4.2 run replayed as an AMP step
(:func:`underflow_steps`), and ``torch.amp.GradScaler("cuda")`` on the same ops as the student's
``ToyLossScaler`` (4.3).  (4.1's float32 baseline is timed, so it runs as the AMP run does: in
a sandboxed student process, one that imports no submission file; see ``checks/test_gpu.py``.)  None of them may run in the student's process (whatever it patched would
change the reference, and the grader disables GradScaler there), and in the grader
none runs in the judge either: the judge holds no CUDA context while a student
process uses the GPU.  So the grader asks a :class:`ReferenceProcess`, a separate
short-lived Python process that runs only torch and this package.  A student running
the checks locally gets :class:`InProcessReference` (same answers, computed in place).

``one_call=True`` ends the process after every answer: on a GPU in an exclusive compute
mode only one process may hold it, so the reference and the student's process take turns.

Protocol: one JSON line per request on stdin (``{"kind", "args"}``), one per answer on
the original stdout (``{"ok": ...}`` or ``{"error": traceback}``); run as
``python -m checks.judge.gpu_reference``.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

Json = Any
CHECKS_PARENT = Path(__file__).resolve().parents[2]
#: Deterministic references worth keeping for the whole grading run (the same for every submission).
CACHED_KINDS = ("underflow_baseline",)


#: The steps of 4.2 the judge accepts: the float16 autocast gradient with every power-of-two loss scale a float32
#: scale can hold, then the float32 gradient (an amp_step without autocast, or one whose autocast does not reach this
#: device: row 2.1's bug, not this row's; nothing underflows in float32, so this row has nothing to tell there).
STEPS = tuple((2.0 ** k, True) for k in range(0, 64)) + ((1.0, False),)
#: How far a weight may lie from the AMP step's, as a fraction of that step's size (largest component).
STEP_TOLERANCE = 1e-3


def _amp_update(args: dict[str, Json], x: Any, y: Any, weight: Any, scale: float, autocast: bool) -> Any:
    """The weight after one SGD step of 4.2's task from ``weight`` with the gradient of the loss (in float16
    autocast, or not) scaled by ``scale`` and unscaled, as torch's GradScaler and the harness's SGD compute it;
    None when that gradient overflows (GradScaler skips the step)."""
    import torch

    model = torch.nn.Linear(x.shape[1], 1, bias=False).to(x.device)
    with torch.no_grad():
        model.weight.copy_(weight)
    with torch.autocast(device_type=x.device.type, dtype=torch.float16, enabled=autocast):
        loss = torch.nn.functional.mse_loss(model(x), y)
    (loss * torch.tensor(scale, device=x.device)).backward()
    grad = model.weight.grad * torch.tensor(scale, dtype=torch.float64).reciprocal().float().to(x.device)
    if not bool(torch.isfinite(grad).all()):
        return None
    with torch.no_grad():
        return model.weight.detach().clone().add_(grad, alpha=-float(args.get("lr", 0.25)))


def underflow_steps(args: dict[str, Json]) -> Json:
    """The first of 4.2's steps (``args["weights"]``: the weight after each, copied out by the student's process)
    whose weight does not follow from the one before by an AMP step, or None when every one does.

    A step follows when its weight is the one before (a skipped step) or what one SGD step with the scaled, then
    unscaled float16 autocast gradient gives for some power-of-two scale (or the float32 gradient, see
    :data:`STEPS`), to :data:`STEP_TOLERANCE` of the step, starting from the zero weight the task starts from.
    Which scale is the scaler's business (rows 1.x and 2.x): here only that each step is a gradient step on the
    task's data, so weights written another way earn nothing.
    """
    import torch

    from checks.runners import probes

    device = args.get("device", "cpu")
    x, y = (t.to(device) for t in probes.underflow_data(args))
    before = torch.zeros(1, x.shape[1], device=device)
    order = list(range(len(STEPS)))
    for index, values in enumerate(args["weights"]):
        after = torch.tensor(values, dtype=torch.float32, device=device).reshape(before.shape)
        if torch.equal(after, before):
            continue
        for k in order:
            expected = _amp_update(args, x, y, before, *STEPS[k])
            if expected is None:
                continue
            size = float((expected - before).abs().max())
            if float((after - expected).abs().max()) <= STEP_TOLERANCE * size:
                order.remove(k)
                order.insert(0, k)  # the next step most likely used the same scale
                break
        else:
            return index
        before = after
    return None


def _kinds() -> dict[str, Callable[[dict[str, Json]], Json]]:
    from checks.runners import gpu_runs as g

    return {"underflow_baseline": lambda args: g.run_gpu_underflow(args, None),
            "underflow_steps": underflow_steps, "scaler_ops": g.torch_scaler_ops}


def compute(kind: str, args: dict[str, Json]) -> Json:
    """The reference ``kind`` for ``args``, as plain data (JSON round-tripped, as if it came from a process)."""
    kinds = _kinds()
    if kind not in kinds:
        raise ValueError(f"unknown reference {kind!r}")
    return json.loads(json.dumps(kinds[kind](json.loads(json.dumps(args)))))


class InProcessReference:
    """References computed in this process (a student's local run of the checks)."""

    def call(self, kind: str, args: dict[str, Json]) -> Json:
        return compute(kind, args)

    def close(self) -> None:
        pass


class ReferenceProcess:
    """References computed in a separate trusted process (the grader's judge never touches CUDA)."""

    def __init__(self, *, one_call: bool = False, timeout: float = 900.0) -> None:
        self.one_call = one_call
        self.timeout = timeout
        self.calls = 0  # answers computed by a process (not from the cache)
        self._cache: dict[str, Json] = {}
        self._process: subprocess.Popen[bytes] | None = None
        self._buffer = b""

    def _start(self) -> subprocess.Popen[bytes]:
        path = [str(CHECKS_PARENT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path),
               "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        self._buffer = b""
        return subprocess.Popen([sys.executable, "-m", "checks.judge.gpu_reference"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=str(CHECKS_PARENT))

    def _readline(self, process: subprocess.Popen[bytes]) -> bytes:
        assert process.stdout is not None
        deadline = time.monotonic() + self.timeout
        fd = process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise RuntimeError(f"the reference process gave no answer within {self.timeout:.0f} s")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise RuntimeError(f"the reference process ended (exit status {process.wait()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def call(self, kind: str, args: dict[str, Json]) -> Json:
        key = json.dumps([kind, args], sort_keys=True)
        if kind in CACHED_KINDS and key in self._cache:
            return self._cache[key]
        if self._process is None or self._process.poll() is not None:
            self._process = self._start()
        process = self._process
        assert process.stdin is not None
        try:
            process.stdin.write((json.dumps({"kind": kind, "args": args}) + "\n").encode())
            process.stdin.flush()
            answer = json.loads(self._readline(process))
        except BaseException:
            self.close()
            raise
        finally:
            if self.one_call:
                self.close()
        self.calls += 1
        if "error" in answer:
            raise RuntimeError(f"the reference {kind!r} failed in the reference process:\n{answer['error']}")
        if kind in CACHED_KINDS:
            self._cache[key] = answer["ok"]
        return answer["ok"]

    def close(self) -> None:
        """End the process (and its CUDA context); the next call starts a new one."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def main() -> int:
    """Serve references: requests on stdin, answers on the original stdout (print() goes to stderr)."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = {"ok": compute(request["kind"], request["args"])}
        except Exception:  # noqa: BLE001 - reported to the judge, which marks the submission ungraded
            answer = {"error": traceback.format_exc()[-8000:]}
        answers.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
