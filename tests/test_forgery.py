"""Forgery attempts (issues 10 and 19): each earns no more than the honest code it contains.

A student who has read ``checks/`` knows every name the harness uses.  These
submissions try to change what the judge observes instead of implementing
anything: patching the harness through ``gc``, a method's ``__globals__``, frames
or a generator's frame, ``operator``, ``functools``, format strings, starred calls,
``match`` patterns, type hints evaluated by ``typing``, a variable named ``self``,
metaclasses, ``__class__`` assignment; reusing torch's GradScaler or its private
kernels by any path, or undoing their refusal; printing hidden inputs; answering with
malformed data.  Each is graded by ``python -m autograder grade`` (one batch under the
policy, one with ``AMP_STATIC_RULES=off`` for the runtime layers behind it).  The same
families, access by access, are unit-tested in tests/test_policy.py.

The honest content of every attack below is the untouched skeleton (0 points on
Tasks 1-2) plus, where stated, the correct Quick Check answers (10 points).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, grade, load_results

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")]

SKELETON = {name: (ROOT / "assignment" / name).read_text() for name in ("loss_scaler.py", "amp_step.py")}
SOLUTION = {name: (ROOT / "solutions" / name).read_text() for name in ("loss_scaler.py", "amp_step.py", "answers.py")}
NO_ZERO_GRAD = SOLUTION["amp_step.py"].replace("    optimizer.zero_grad(set_to_none=True)\n", "")
ANSWERS = SOLUTION["answers.py"]

#: Replaces the harness's scenario runner with one that answers Task 1 with torch's own scaler.
PATCH_HARNESS = '''
def _forge(harness):
    def run_scenario(name, args, submission):
        return harness.run_scaler_ops(args, harness.torch_scaler, submission.root)
    harness.run_scenario = run_scenario
'''

GC_WALK = PATCH_HARNESS + '''
import gc
for _obj in gc.get_objects():
    if type(_obj).__name__ == "module" and getattr(_obj, "__name__", "") == "checks.harness":
        _forge(_obj)
'''

FRAME_WALK = PATCH_HARNESS + '''
import sys
_frame = sys._getframe()
while _frame is not None:
    if _frame.f_globals.get("__name__") == "checks.harness":
        _frame.f_globals["run_scaler_ops"] = lambda *a, **k: []
        break
    _frame = _frame.f_back
'''

GLOBALS_VIA_OPTIMIZER = '''
    def unscale_(self, optimizer):
        harness = type(optimizer).step.__globals__
        harness["run_scenario"] = None
'''

GENERATOR_FRAME = '''
def _peek():
    yield 1
_g = _peek()
next(_g)
_outer = _g.gi_frame.f_back
'''

ATEN_GETATTR = '''
_kernel = getattr(torch.ops.aten, "_amp_" + "update_scale_")
'''

#: A complete scaler that delegates to torch's private kernels through torch.ops.aten.
ATEN_DELEGATION = '''
import torch


class ToyLossScaler:
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        self._s = torch.full((), float(init_scale))
        self._t = torch.zeros((), dtype=torch.int32)
        self._f = torch.zeros(())
        self.g, self.b, self.i = growth_factor, backoff_factor, growth_interval

    def scale(self, outputs):
        return outputs * self._s

    def unscale_(self, optimizer):
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        torch.ops.aten._amp_foreach_non_finite_check_and_unscale_(grads, self._f, self._s.reciprocal())

    def step(self, optimizer):
        self.unscale_(optimizer)
        return None if self._f.item() else optimizer.step()

    def update(self, new_scale=None):
        torch.ops.aten._amp_update_scale_(self._s, self._t, self._f, self.g, self.b, self.i)
        self._f.zero_()

    def get_scale(self):
        return float(self._s)

    def get_growth_tracker(self):
        return int(self._t)
'''

#: An amp_step that does no training and writes the probe's observations itself.
PROBE_LOG_FORGERY = '''
import torch


def amp_step(model, inputs, targets, loss_fn, optimizer, scaler, device_type="cuda", dtype=torch.float16,
             max_grad_norm=None):
    model._log.append({"event": "forward", "autocast": True, "dtype": "float16"})
    model._log.append({"event": "loss", "autocast": True, "dtype": "float16", "value": 0.0})
    return torch.zeros(())
'''

CTYPES_AND_FILES = '''
import ctypes
_libc = ctypes.CDLL(None)
'''

WRITE_OUTSIDE = '''
with open("/tmp/forgery-was-here", "w") as _f:
    _f.write("x")
'''

PRINT_EVERYTHING = '''
    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000) -> None:
        print("FORGERY-SEES", init_scale, growth_factor, backoff_factor, growth_interval)
        self._real_init(init_scale, growth_factor, backoff_factor, growth_interval)
'''


#: Every run-time path to torch's real GradScaler, its kernels or the harness that issue 19 found, each tried
#: in turn (a refused one raises and is skipped): if any got through, ToyLossScaler would become torch's scaler.
TASK1_EVERY_PATH = '''
import functools
import operator

_FOUND = []


def _try(path):
    try:
        found = path()
    except Exception:
        return
    if isinstance(found, type) and found.__name__ == "GradScaler":
        _FOUND.append(found)


_try(lambda: operator.attrgetter("amp.grad_scaler.GradScaler")(torch))
_try(lambda: functools.reduce(getattr, ["amp", "grad_scaler", "GradScaler"], torch))
_try(lambda: functools.partial(getattr, torch)("_C")._VariableFunctions)
_try(lambda: getattr(*(torch, "o" + "ps")).aten)
_try(lambda: "{0.amp.grad_scaler.GradScaler}".format(torch))
_try(lambda: type(torch.Tensor)("T", (torch.Tensor,), {}))


def _hinted(x: "torch.amp.grad_scaler.GradScaler") -> None:
    pass


def _reload():
    import importlib
    return importlib.reload(torch.amp.grad_scaler).GradScaler


def _hints():
    import typing
    return typing.get_type_hints(_hinted)["x"]


def _sys():
    import sys
    return sys.modules["torch.amp.grad_scaler"].GradScaler


for _path in (_reload, _hints, _sys):
    _try(_path)


def _undo():
    self = torch.amp  # a variable named self changes nothing
    self.GradScaler = self._saved


_try(_undo)
if _FOUND:
    class ToyLossScaler(_FOUND[0]):
        def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
            super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval)
'''

#: An amp_step that reaches for the scenario registry by every run-time path, to answer every Task 2 call itself.
TASK2_EVERY_PATH = '''
import functools
import operator

_REGISTRIES = []


def _try(path):
    try:
        _REGISTRIES.append(path())
    except Exception:
        pass


def _forge(model, optimizer):
    step = type(optimizer).step
    _try(lambda: operator.attrgetter("__globals__")(step))
    _try(lambda: functools.reduce(getattr, ["__glo" + "bals__"], step))
    _try(lambda: getattr(*(step, "__globals__")))
    _try(lambda: "{0.__globals__}".format(step))
    _try(lambda: model._log)
    for found in _REGISTRIES:
        try:
            found["registry"]._SCENARIOS.clear()
        except Exception:
            pass
'''

#: A correct amp_step except that it never zeroes the gradients (row 2.4), plus tricks that try to hide it:
#: the probe's log edited through a variable named ``self``, and a Parameter turned into a subclass whose
#: ``__torch_function__`` makes every measurement read 0.0.
HIDE_A_BUG = '''

def _hide(model):
    try:
        self = model
        self._log.append({"event": "zero_grad"})
    except Exception:
        pass
    try:
        evil = type("Evil", (torch.nn.Parameter,), {"__torch_function__": classmethod(lambda *a, **k: 0.0)})
        for param in model.parameters():
            setattr(param, "__class__", evil)
    except Exception:
        pass
'''


def with_module_code(text: str, code: str) -> str:
    """``code`` appended at module level of ``text``."""
    return text + "\n\n" + code


def method_replaced(text: str, code: str) -> str:
    """``code`` (an indented method) added at the end of class ToyLossScaler of ``text``."""
    return text.rstrip() + "\n" + code


def printing_solution() -> str:
    text = SOLUTION["loss_scaler.py"].replace("    def __init__(\n", "    def _real_init(\n", 1)
    return method_replaced(text, PRINT_EVERYTHING)


CASES: dict[str, dict[str, str]] = {
    # static rules on
    "answers_gc_walk": {**SKELETON, "answers.py": with_module_code(ANSWERS, GC_WALK)},
    "scaler_gc_walk": {**SKELETON, "answers.py": ANSWERS, "loss_scaler.py": with_module_code(SKELETON["loss_scaler.py"], GC_WALK)},
    "scaler_frame_walk": {**SKELETON, "answers.py": ANSWERS,
                          "loss_scaler.py": with_module_code(SKELETON["loss_scaler.py"], FRAME_WALK)},
    "scaler_globals_via_optimizer": {**SKELETON, "answers.py": ANSWERS,
                                     "loss_scaler.py": method_replaced(SKELETON["loss_scaler.py"], GLOBALS_VIA_OPTIMIZER)},
    "scaler_generator_frame": {**SKELETON, "answers.py": ANSWERS,
                               "loss_scaler.py": with_module_code(SKELETON["loss_scaler.py"], GENERATOR_FRAME)},
    "scaler_aten_getattr": {**SKELETON, "answers.py": ANSWERS,
                            "loss_scaler.py": with_module_code(SKELETON["loss_scaler.py"], ATEN_GETATTR)},
    "amp_step_gc_walk": {**SKELETON, "answers.py": ANSWERS, "amp_step.py": with_module_code(SKELETON["amp_step.py"], GC_WALK)},
    "amp_step_probe_log": {**SKELETON, "answers.py": ANSWERS, "amp_step.py": PROBE_LOG_FORGERY},
    "printing_solution": {**SOLUTION, "loss_scaler.py": printing_solution()},
    "task1_every_path": {**SKELETON, "answers.py": ANSWERS,
                         "loss_scaler.py": with_module_code(SKELETON["loss_scaler.py"], TASK1_EVERY_PATH)},
    "task2_every_path": {**SKELETON, "answers.py": ANSWERS, "amp_step.py": with_module_code(
        SKELETON["amp_step.py"], TASK2_EVERY_PATH).replace(
        '    raise NotImplementedError("amp_step is not implemented yet', '    _forge(model, optimizer)\n'
        '    raise NotImplementedError("amp_step is not implemented yet')},
    "bug_no_zero_grad": {**SOLUTION, "amp_step.py": NO_ZERO_GRAD},
    "bug_no_zero_grad_hidden": {**SOLUTION, "amp_step.py": with_module_code(NO_ZERO_GRAD, HIDE_A_BUG).replace(
        "    scaler.step(optimizer)\n", "    _hide(model)\n    scaler.step(optimizer)\n")},
}
RUNTIME_CASES: dict[str, dict[str, str]] = {
    # static rules off: the runtime guard and the reply validation alone
    "rt_scaler_gc_walk": CASES["scaler_gc_walk"],
    "rt_answers_gc_walk": CASES["answers_gc_walk"],
    "rt_aten_delegation": {**SKELETON, "answers.py": ANSWERS, "loss_scaler.py": ATEN_DELEGATION},
    "rt_frame_walk_short_replies": CASES["scaler_frame_walk"],
    "rt_ctypes": {**SKELETON, "answers.py": ANSWERS,
                  "loss_scaler.py": with_module_code(SKELETON["loss_scaler.py"], CTYPES_AND_FILES)},
    "rt_write_outside": {**SKELETON, "answers.py": ANSWERS,
                         "loss_scaler.py": with_module_code(SKELETON["loss_scaler.py"], WRITE_OUTSIDE)},
}
HONEST_WITH_ANSWERS = 10.0  # the skeleton with the right Quick Check answers
#: Cases whose honest content is another case of the batch (an honest bug), not the skeleton.
HONEST_BASELINE = {"bug_no_zero_grad_hidden": "bug_no_zero_grad"}


def _write(root: Path, cases: dict[str, dict[str, str]]) -> list[Path]:
    folders = []
    for name, files in cases.items():
        folder = root / name
        folder.mkdir(parents=True)
        for filename, text in files.items():
            (folder / filename).write_text(text)
        folders.append(folder)
    return folders


def _rows(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {test["number"]: test for test in results["tests"] if test.get("max_score")}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("forgery")
    out = root / "out"
    done = grade(_write(root / "in", CASES), out, "--jobs", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: load_results(out, name) for name in CASES}


@pytest.fixture(scope="module")
def graded_runtime(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("forgery-runtime")
    out = root / "out"
    done = grade(_write(root / "in", RUNTIME_CASES), out, "--jobs", "2", env={"AMP_STATIC_RULES": "off"})
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: load_results(out, name) for name in RUNTIME_CASES}


@pytest.mark.parametrize("name", [n for n in CASES if n not in ("printing_solution", "bug_no_zero_grad")])
def test_forgery_earns_no_more_than_its_honest_code(graded: dict[str, dict[str, Any]], name: str) -> None:
    honest = graded[HONEST_BASELINE[name]]["score"] if name in HONEST_BASELINE else HONEST_WITH_ANSWERS
    assert graded[name]["score"] <= honest, {n: r["score"] for n, r in _rows(graded[name]).items() if r["score"]}


def test_a_hidden_bug_still_costs_its_row(graded: dict[str, dict[str, Any]]) -> None:
    """The honest baseline of the last case really loses row 2.4 (else the comparison above proves nothing)."""
    rows = _rows(graded["bug_no_zero_grad"])
    assert rows["2.4"]["score"] < rows["2.4"]["max_score"] and graded["bug_no_zero_grad"]["score"] < 90
    assert _rows(graded["bug_no_zero_grad_hidden"])["2.4"]["score"] < rows["2.4"]["max_score"]


@pytest.mark.parametrize("name, file, construct", [
    ("scaler_gc_walk", "loss_scaler.py", "import gc"),
    ("scaler_frame_walk", "loss_scaler.py", ".f_globals"),
    ("scaler_globals_via_optimizer", "loss_scaler.py", ".__globals__"),
    ("scaler_generator_frame", "loss_scaler.py", ".gi_frame"),
    ("scaler_aten_getattr", "loss_scaler.py", "torch.ops is not available"),
    ("amp_step_gc_walk", "amp_step.py", "import gc"),
    ("amp_step_probe_log", "amp_step.py", "reading ._log"),
])
def test_refused_construct_is_named_in_the_feedback(graded: dict[str, dict[str, Any]], name: str, file: str,
                                                    construct: str) -> None:
    """Refused when compiled ("was not run"), when imported, or when called: every row of the task says which."""
    task = "1." if file == "loss_scaler.py" else "2."
    outputs = [row["output"] for number, row in _rows(graded[name]).items() if number.startswith(task)]
    assert outputs and all(construct in text for text in outputs), outputs[0][:800]
    assert all("Rules for your code" in text for text in outputs)


def test_answers_file_is_read_not_run(graded: dict[str, dict[str, Any]]) -> None:
    results = graded["answers_gc_walk"]
    assert results["score"] == HONEST_WITH_ANSWERS  # the answers count; the code around them never ran
    assert all(row["score"] == 0 for number, row in _rows(results).items() if number[0] in "12")


def test_hidden_test_output_stays_with_hidden_rows(graded: dict[str, dict[str, Any]]) -> None:
    results = graded["printing_solution"]
    assert results["score"] == 90
    hidden = [row for row in _rows(results).values() if row["visibility"] != "visible"]
    shown_late = "\n".join(row["output"] for row in hidden)
    assert "Output printed by your code during this test" in shown_late and "FORGERY-SEES" in shown_late
    visible_lines = {line for line in results["output"].splitlines() if "FORGERY-SEES" in line}
    hidden_only = {line for line in shown_late.splitlines() if "FORGERY-SEES" in line} - visible_lines
    assert hidden_only, "the hidden tests should construct scalers the public ones do not"
    assert not hidden_only & set(results["output"].splitlines())


def test_runtime_guard_refuses_gc_walks_and_ctypes(graded_runtime: dict[str, dict[str, Any]]) -> None:
    for name in ("rt_scaler_gc_walk", "rt_ctypes"):
        outputs = " ".join(row["output"] for number, row in _rows(graded_runtime[name]).items() if number.startswith("1."))
        assert "is not allowed while the grader runs your code" in outputs, outputs[:600]
        assert graded_runtime[name]["score"] <= HONEST_WITH_ANSWERS
    assert graded_runtime["rt_answers_gc_walk"]["score"] == HONEST_WITH_ANSWERS


def test_private_kernels_are_disabled_whatever_the_path(graded_runtime: dict[str, dict[str, Any]]) -> None:
    results = graded_runtime["rt_aten_delegation"]
    task1 = {number: row for number, row in _rows(results).items() if number.startswith("1.")}
    assert sum(row["score"] for row in task1.values()) == 0
    assert "is not allowed in Task 1" in " ".join(row["output"] for row in task1.values())


def test_frame_walk_is_refused_by_the_runtime_guard(graded_runtime: dict[str, dict[str, Any]]) -> None:
    """With the policy off, the runtime guard alone refuses the frame walk (``sys._getframe`` called by the
    submission's own code): it cannot reach the harness to make its process answer short replies (what the
    judge does with malformed replies is unit-tested in tests/test_replies.py)."""
    results = graded_runtime["rt_frame_walk_short_replies"]
    assert results["score"] <= HONEST_WITH_ANSWERS
    task1 = [row for number, row in _rows(results).items() if number.startswith("1.")]
    assert all("sys._getframe is not allowed while the grader runs your code" in row["output"] for row in task1)
    assert not any("internal problem" in row["output"] for row in task1)


def test_nothing_written_outside_scratch(graded_runtime: dict[str, dict[str, Any]]) -> None:
    assert not Path("/tmp/forgery-was-here").exists()
    outputs = " ".join(row["output"] for row in _rows(graded_runtime["rt_write_outside"]).values())
    assert "writing '/tmp/forgery-was-here'" in outputs


#: Answers the GPU scenarios itself from amp_step.py's module level, found through ``gc``: a fabricated 33x
#: speed-up for the old in-process timing (run_speed), and well-formed, instant replies for the runs the grader
#: now times and measures (run_train: the untrained model's weights; run_gpu_underflow: a made-up weight).
GPU_FORGERY = '''
import gc
for _obj in gc.get_objects():
    if type(_obj).__name__ == "module" and getattr(_obj, "__name__", "") == "checks.gpu_scenarios":
        _obj.run_speed = lambda *a, **k: {"amp": {"time_to_target_ms": 1.0, "losses": [0.0]}}

        def _instant_train(args, amp_step, root=None, _g=_obj):
            cfg = _g.speed_config(args.get("device", "cuda"), **{k: v for k, v in args.items() if k != "device"})
            return {"ok": None, "weights": _g._copy_out_weights(list(_g.build_model(cfg).parameters()))}

        _obj.run_train = _instant_train
        _obj.run_gpu_underflow = lambda args, amp_step, root=None: {"ok": None, "final_weight": [1e-4] * 16,
                                                                     "device_info": {"name": "forged"}}
'''


def test_gpu_part_cannot_be_forged_in_dry_mode(tmp_path: Path) -> None:
    """Nothing refuses the forgery (student code may patch its own process): it earns nothing because no GPU row
    reads what the student process computes -- the grader times the round trips and computes the losses from the
    weights copied out.  Graded beside its honest twin (the skeleton amp_step), it earns 0 wherever the twin does."""
    import subprocess

    _write(tmp_path, {"gpu_forgery": {**SKELETON, "answers.py": ANSWERS,
                                       "amp_step.py": with_module_code(SKELETON["amp_step.py"], GPU_FORGERY)},
                      "gpu_honest": {**SKELETON, "answers.py": ANSWERS}})
    done = subprocess.run([sys.executable, "-m", "autograder", "grade-gpu", str(tmp_path / "gpu_forgery"),
                           str(tmp_path / "gpu_honest"), "--out", str(tmp_path / "out"), "--dry"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {name: {test["number"]: test for test in json.loads(
        (tmp_path / "out" / name / "gpu_results.json").read_text())["tests"]} for name in ("gpu_forgery", "gpu_honest")}
    honest, forged = rows["gpu_honest"], rows["gpu_forgery"]
    assert all(test["score"] == 0 for test in honest.values())  # the skeleton earns nothing on the GPU part
    for number, test in forged.items():
        assert test["score"] <= honest[number]["score"] == 0, (number, test["output"][:600])
    for number in ("4.1", "4.2"):  # the forged replies were the ones judged (the skeleton would have raised)
        assert "NotImplementedError" not in forged[number]["output"], forged[number]["output"][:600]
        assert "computed by the grader" in forged[number]["output"] or "grader computed" in forged[number]["output"]
    outputs = " ".join(test["output"] for test in forged.values())
    assert "not allowed" not in outputs and "may be imported" not in outputs  # no refusal: none is needed
