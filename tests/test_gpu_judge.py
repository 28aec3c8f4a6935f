"""The GPU part's judge keeps its own secrets and its own verdicts (in-process, on the CPU).

* 4.1's evaluation batch comes from a secret the judge draws after every run and never sends;
* 4.1's weights must lie where float32 training takes them, and each of 4.2's steps must be an AMP step;
* a device failure a student process reports is the grader's only if the judge's own canary fails too;
* a row is ungraded because the judge's code failed, never because of the words in its message.

End to end (grade-gpu --dry, the attacks of tests/attacks.py): tests/test_forgery.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from conftest import ROOT, cuda_failed_to_start, cuda_works

sys.path.insert(0, str(ROOT / "solutions"))
from amp_step import amp_step as solution_amp_step  # noqa: E402

from checks import test_gpu  # noqa: E402
from checks.judge import gpu_losses, gpu_reference  # noqa: E402
from checks.runners import gpu_runs, harness, probes  # noqa: E402


class InProcessStudent:
    """The GPU scenarios answered in this process with the solution's amp_step; records what is sent and when."""

    device = "cpu"

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.sent: list[dict[str, Any]] = []
        self.reference = gpu_reference.InProcessReference()

    def run(self, scenario: str, args: dict[str, Any], *, timeout: float | None = None) -> Any:
        self.sent.append(args)
        self.events.append(scenario)
        return json.loads(json.dumps(gpu_runs.run_train(args, None if scenario == "gpu_train_fp32"
                                                        else solution_amp_step)))


def test_the_evaluation_batch_is_drawn_from_the_judges_secret_after_every_run(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = gpu_runs.speed_config("cpu", seed=5)
    x1, y1 = gpu_losses.evaluation_batch(cfg, 1)
    x1, y1 = x1.clone(), y1.clone()
    x2, _ = gpu_losses.evaluation_batch(cfg, 2)
    assert x1.shape == (1024, 64) and not torch.equal(x1, x2)
    assert torch.equal(gpu_losses.evaluation_batch(cfg, 1)[0], x1)  # one secret, one batch (the judge's loss is stable)
    a, b, after_teacher = gpu_runs.teacher(cfg)
    assert torch.allclose(y1, torch.tanh(x1 @ a) @ b)  # the task's targets
    seeded = torch.randn(1024, 64, generator=after_teacher)  # what the seed alone gives a student process
    assert not torch.equal(seeded, x1) and not torch.equal(seeded, x2)

    events: list[str] = []
    drawn: list[int] = []
    used: list[int] = []
    real_secret, real_batch = test_gpu.judge_secret, gpu_losses.evaluation_batch

    def judge_secret() -> int:
        events.append("secret")
        drawn.append(real_secret())
        return drawn[-1]

    def batch(cfg: dict[str, Any], secret: int) -> Any:
        used.append(secret)
        return real_batch(cfg, secret)

    monkeypatch.setattr(test_gpu, "judge_secret", judge_secret)
    monkeypatch.setattr(gpu_losses, "evaluation_batch", batch)
    student = InProcessStudent(events)
    test_gpu.test_gpu_amp_reaches_fp32_loss_sooner(student, "cpu", student.reference)
    runs = 2 * (1 + gpu_runs.SPEED_DRY["repeats"])  # fp32 and AMP: a warm-up and the timed runs each
    assert events == ["gpu_train_fp32"] * (runs // 2) + ["gpu_train"] * (runs // 2) + ["secret"]
    assert len(drawn) == 1 and set(used) == set(drawn)
    assert str(drawn[0]) not in json.dumps(student.sent)


def test_trained_weights_are_measured_against_float32_training() -> None:
    cfg = gpu_runs.speed_config("cpu", seed=7)
    fp32 = gpu_losses.decode_weights(cfg, gpu_runs.run_train(cfg, None)["weights"])
    amp = gpu_losses.decode_weights(cfg, gpu_runs.run_train(cfg, solution_amp_step)["weights"])
    start = gpu_losses.initial_weights(cfg)
    assert gpu_losses.distance_from_training(cfg, fp32, fp32) == 0.0
    assert gpu_losses.distance_from_training(cfg, start, fp32) == pytest.approx(1.0)
    assert gpu_losses.distance_from_training(cfg, amp, fp32) < test_gpu.MAX_DISTANCE / 2
    # A last layer fitted by least squares on the task's teacher (no steps): where training would not take it.
    a, b, _ = gpu_runs.teacher(cfg)
    x = torch.randn(4096, 64, generator=torch.Generator().manual_seed(0))
    model = gpu_runs.build_model({**cfg, "device": "cpu"})
    with torch.no_grad():
        features = torch.cat([model[:-1](x), torch.ones(len(x), 1)], 1)
        solved = torch.linalg.lstsq(features, torch.tanh(x @ a) @ b).solution
        model[-1].weight.copy_(solved[:-1].t())
        model[-1].bias.copy_(solved[-1])
    fitted = [p.detach() for p in model.parameters()]
    assert gpu_losses.distance_from_training(cfg, fitted, fp32) > 2 * test_gpu.MAX_DISTANCE


def test_each_underflow_step_is_replayed_as_an_amp_step() -> None:
    args = gpu_runs.underflow_args("cpu")
    honest = gpu_runs.run_gpu_underflow(args, solution_amp_step)["weights"]
    assert len(honest) == 200 and honest[-1] != honest[0]
    assert gpu_reference.compute("underflow_steps", {**args, "weights": honest}) is None
    x, y = probes.underflow_data(args)
    solved = torch.linalg.lstsq(x.double(), y.double()).solution.t().float().reshape(-1).tolist()
    assert probes.underflow_loss(args, solved) < 1e-12  # 4.2's loss check alone would pass it
    assert gpu_reference.compute("underflow_steps", {**args, "weights": [solved] * 200}) == 0
    late = honest[:120] + [solved] * 80  # honest steps, then the answer written in
    assert gpu_reference.compute("underflow_steps", {**args, "weights": late}) == 120
    nudged = [list(w) for w in honest]
    nudged[60][3] += 0.01 * abs(nudged[60][3] - nudged[59][3])  # 1 % of one step's change, on one weight
    assert gpu_reference.compute("underflow_steps", {**args, "weights": nudged}) == 60
    # Float32 steps (autocast that does not reach the device: row 2.1's bug) are gradient steps too: nothing underflows.
    def without_autocast(model: Any, inputs: Any, targets: Any, loss_fn: Any, optimizer: Any, scaler: Any,
                         **_: Any) -> Any:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    plain = gpu_runs.run_gpu_underflow(args, without_autocast)["weights"]
    assert gpu_reference.compute("underflow_steps", {**args, "weights": plain}) is None
    # Unscaled float16 steps are AMP steps with a scale of 1: the run stalls, which 4.2's loss check fails.
    unscaled = gpu_runs.run_gpu_underflow(args, None)["weights"]
    assert gpu_reference.compute("underflow_steps", {**args, "weights": unscaled}) is None


# --------------------------------------------------------------------------- whose fault a failure is


CLAIM = {"grader_fault": {"type": "RuntimeError", "message": "CUDA error: an illegal memory access", "trace": "..."}}


class Claims:
    """A runner whose student process claims a device failure; its canary answers ``canary``."""

    def __init__(self, canary: Any) -> None:
        self.verdict = canary
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def canary(self, scenario: str, args: dict[str, Any]) -> Any:
        self.asked.append((scenario, args))
        return self.verdict


def test_a_claimed_device_failure_is_the_students_when_the_canary_runs() -> None:
    runner = Claims({"ok": None})
    got = test_gpu.answered(runner, "gpu_underflow", {"device": "cuda"}, CLAIM)
    assert got == {"error": {"type": "RuntimeError", "message": "CUDA error: an illegal memory access", "trace": ""}}
    assert runner.asked == [("gpu_underflow", {"device": "cuda"})]
    failing = Claims({"grader_fault": {"type": "RuntimeError", "message": "no CUDA", "trace": "canary trace"}})
    with pytest.raises(gpu_runs.GraderFault, match="without student code too") as raised:
        test_gpu.answered(failing, "gpu_train", {"device": "cuda"}, CLAIM)
    assert "canary trace" in str(raised.value)
    ok = {"ok": None, "weights": []}
    assert test_gpu.answered(Claims({"ok": None}), "gpu_train", {}, ok) is ok  # no claim: no canary
    with pytest.raises(gpu_runs.GraderFault):  # a local run (no canary): the claim as it is
        test_gpu.answered(object(), "gpu_train", {}, CLAIM)


def _submission(tmp_path: Path, amp_step: str) -> harness.Submission:
    for name in ("loss_scaler.py", "answers.py"):
        (tmp_path / name).write_text((ROOT / "solutions" / name).read_text())
    (tmp_path / "amp_step.py").write_text(amp_step)
    return harness.Submission(tmp_path)


def test_the_canary_runs_the_graders_side_without_student_code(tmp_path: Path) -> None:
    from checks.student import serve

    assert serve.SCENARIO_NEEDS["gpu_canary"] == ()  # its process imports no submission file
    submission = _submission(tmp_path, "def amp_step(*args, **kwargs):\n    raise RuntimeError('CUDA error: x')\n")
    for scenario, args in (("gpu_train", gpu_runs.speed_config("cpu", steps=2)),
                           ("gpu_underflow", gpu_runs.underflow_args("cpu", steps=2)),
                           ("gpu_scaler_ops", {"world": {"optimizers": [{"groups": [[2]]}], "device": "cpu"},
                                               "ops": [{"op": "new"}]})):
        assert gpu_runs.run_scenario("gpu_canary", {"scenario": scenario, "args": args}, submission) == {"ok": None}
    if not cuda_works():  # the same on a device that does not work: the grader's failure
        failed = gpu_runs.run_scenario("gpu_canary", {"scenario": "gpu_underflow",
                                                      "args": gpu_runs.underflow_args("cuda", steps=2)}, submission)
        assert set(failed) == {"grader_fault"} and cuda_failed_to_start(failed["grader_fault"]["trace"])


def test_a_rows_words_never_make_it_the_graders_fault() -> None:
    from autograder.engine import judge, rubric

    item = rubric.GPU_ITEMS[0]
    words = judge.Outcome(item.test, f"{item.test}", False, message=judge.INTERNAL)  # the student's text
    assert judge.score([words], (item,))[0][0].internal is False
    raised = judge.Outcome(item.test, f"{item.test}", False, message=judge.INTERNAL, internal="Traceback ...")
    assert judge.score([raised], (item,))[0][0].internal is True


def test_an_underflow_reply_without_its_steps_earns_nothing() -> None:
    """A reply (forged in the student's process) with the answer as the final weight and no step to replay."""
    args = gpu_runs.underflow_args("cpu")
    x, y = probes.underflow_data(args)
    solved = torch.linalg.lstsq(x.double(), y.double()).solution.t().float().reshape(-1).tolist()

    class Forged:
        device = "cpu"

        def run(self, scenario: str, given: dict[str, Any], *, timeout: float | None = None) -> Any:
            return {"ok": None, "final_weight": solved, "device_info": {"name": "forged"}}

    with pytest.raises(AssertionError, match="did not copy out the weight after each of the 200 steps"):
        test_gpu.test_gpu_underflow_needs_the_scaler(Forged(), "cpu", gpu_reference.InProcessReference())
