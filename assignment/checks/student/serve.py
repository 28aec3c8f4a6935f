"""The process that runs a submission's files: the same in the grader and in the public checks.

Student code never runs in the process that judges it.  Each set of contract files runs in a
process of its own (:func:`files_needed` says which files a scenario needs), which answers
scenario requests, one JSON line each, with plain data (:func:`answer_requests`).  Where
``loss_scaler.py`` is among its files, torch's scaler is taken out of the process before the
first student line (:mod:`checks.student.absence`).

* The grader forks these processes from its zygote and confines them first
  (``autograder.sandbox.zygote``), then calls :func:`answer_requests`.
* The public checks start one with ``python -m checks.student.serve ROOT FILE...`` (see
  :class:`LocalProcess`): the judge's side (the tests and torch's reference scaler) stays in
  pytest's process, exactly as in the grader, so the checks refuse what the grader refuses.

This module imports nothing but torch, the standard library and the harness.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from checks import words
from checks.student import absence
from checks.runners import harness
from checks.runners.harness import Json
#: The order files are imported in (``answers.py`` is never imported: its answers are parsed).
IMPORT_ORDER = ("loss_scaler", "amp_step")
#: The contract files each scenario's process imports (the student's scaler is added to Task 2's
#: scenarios unless they use torch's scaler or the contract's stand-in, see :func:`files_needed`).
SCENARIO_NEEDS = {
    "scaler_ops": ("loss_scaler",),
    "amp_probe": ("amp_step",),
    "underflow": ("amp_step",),
    "gpu_train": ("amp_step",),
    "gpu_train_fp32": (),  # 4.1's float32 baseline, timed like the AMP run in a process without student code
    "gpu_underflow": ("amp_step",),
    "gpu_scaler_ops": ("loss_scaler",),
    "gpu_preflight": (),
    "gpu_canary": (),  # the grader's side of a scenario, after a claimed device failure (checks/runners/gpu_runs.py)
}
TORCH_SCALERS = ("torch", "contract")


def files_needed(scenario: str, args: dict[str, Json]) -> tuple[str, ...]:
    """The contract modules a process must import to run ``scenario`` with ``args``, in import order."""
    needed = SCENARIO_NEEDS[scenario]
    if scenario in ("amp_probe", "underflow") and args.get("scaler") not in TORCH_SCALERS:
        needed += ("loss_scaler",)
    return tuple(name for name in IMPORT_ORDER if name in needed)


def loses_reference_scaler(modules: tuple[str, ...]) -> bool:
    """Whether a process importing ``modules`` runs Task 1's file, and so must not have torch's scaler."""
    return "loss_scaler" in modules


def prepare(modules: tuple[str, ...], strict: bool = True) -> None:
    """What a process does before its first student line: Task 1's processes lose torch's scaler (``strict``: the
    grader's, which refuse to go on where torch's kernels could not be taken out of memory too; the public checks
    on a student's machine go on)."""
    if loses_reference_scaler(modules):
        absence.remove_reference_scaler(strict)


def send(fd: int, message: dict[str, Json]) -> None:
    """Write one JSON line to ``fd``, after flushing what the student's code printed so far (so the
    judge can tell which call printed what)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a student may have replaced or closed them
            pass
    view = memoryview((json.dumps(message, allow_nan=True) + "\n").encode())
    while view:
        view = view[os.write(fd, view):]


def answer(call: dict[str, Json], submission: harness.Submission) -> dict[str, Json]:
    """``{"ok": observation}`` or a fault (:func:`fault`) for one scenario call."""
    try:
        harness.seed_cpu(0)
        return {"ok": harness.run_scenario(call["scenario"], call["args"], submission)}
    except harness.SubmissionFault as exc:
        return fault(exc)
    except BaseException as exc:  # noqa: BLE001 - e.g. SystemExit from student code
        return fault(harness.stopped(exc))


def fault(said: Any) -> dict[str, Json]:
    """``{"fault": message}`` for ``said`` (a message, or a fault raised with one), with the message's record
    (``"said"``, :class:`checks.words.Spoken`) where it has one: the judge renders it in its language
    (:func:`checks.words.shown`).  Only "ok" and "fault" are compared with other answers: the record changes no
    digest."""
    record = words.record_of(said)
    return {"fault": str(said)} if record is None else {"fault": str(said), "said": record}


def answer_requests(request_fd: int, reply_fd: int, submission: harness.Submission) -> None:
    """Answer requests until the request pipe closes: a request is one call or ``{"id", "batch": [...]}``."""
    with open(request_fd, "rb", closefd=False) as requests:
        for line in requests:
            message = json.loads(line)
            for index, call in enumerate(message.get("batch") or [message]):  # a batch: one reply per call
                send(reply_fd, {"id": message["id"] + index, **answer(call, submission)})


class LocalProcess:
    """One local student process (public checks): the files it imported, its pipes."""

    def __init__(self, root: Path, modules: tuple[str, ...]) -> None:
        reply_r, reply_w = os.pipe()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                            os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        self.popen = subprocess.Popen([sys.executable, "-m", "checks.student.serve", str(root), str(reply_w),
                                       *modules], stdin=subprocess.PIPE, pass_fds=(reply_w,), env=env)
        os.close(reply_w)
        self.replies = os.fdopen(reply_r, "rb")
        self.next_id = 0

    def call(self, scenario: str, args: dict[str, Json]) -> dict[str, Json] | None:
        """The reply to one call, or None when the process ended without one (it is then closed)."""
        self.next_id += 1
        try:
            assert self.popen.stdin is not None
            self.popen.stdin.write((json.dumps({"id": self.next_id, "scenario": scenario, "args": args}) + "\n").encode())
            self.popen.stdin.flush()
            line = self.replies.readline()
        except OSError:
            line = b""
        if not line:
            self.close()
            return None
        return json.loads(line)

    def close(self) -> None:
        if self.popen.stdin is not None:
            try:
                self.popen.stdin.close()
            except OSError:
                pass
        self.replies.close()
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def _main(argv: list[str]) -> None:
    root, reply_fd, modules = Path(argv[0]), int(argv[1]), tuple(argv[2:])
    prepare(modules, strict=False)
    try:
        answer_requests(0, reply_fd, harness.Submission(root))
    finally:
        os._exit(0)  # student threads or atexit hooks must not keep the checks waiting


if __name__ == "__main__":
    from checks.runners import gpu_runs, probes  # noqa: F401 - they register their scenarios

    _main(sys.argv[1:])
