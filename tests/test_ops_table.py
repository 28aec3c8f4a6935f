"""Task 1's table of scenario operations (checks/runners/ops.py): every op complete, run, checked and printed alike.

An op declared in the table runs in the student's process, has its reply checked by the judge and appears in
failure snippets; a part missing fails here, naming the op, rather than telling every student (the reference
solution included) that their process "returned something malformed".  Each op is also run end to end: the
reference solution's result passes the judge's reply check, and the snippet written for it, run in a fresh
Python, prints what the failure message says it prints.  The public checks' runner refuses a malformed reply with
the grader's own check and words.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from autograder.sandbox import runner as sandbox
from checks import plugin
from checks.judge import expect, replies
from checks.runners import harness, ops
from checks.student import serve
from conftest import ROOT

_spec = importlib.util.spec_from_file_location("reference_loss_scaler", ROOT / "solutions" / "loss_scaler.py")
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)

WORLD = {"optimizers": [{"groups": [[2], [3]]}], "seed": 0}
NEW = {"op": "new", "kwargs": {"init_scale": 8.0, "growth_interval": 1}}
GRADS = {"op": "grads", "opt": 0, "values": [[1.0, 2.0], [3.0, 4.0, 5.0]]}
#: An example of each op that takes fields, run after NEW and GRADS (the first two after what comes before them).
#: An op that takes none needs no line here: its example is ``{"op": name}`` (:data:`EXAMPLES`); one that takes
#: fields and has none here fails below, by name, when that example cannot run.
WRITTEN: dict[str, dict[str, Any]] = {
    "new": NEW,
    "grads": GRADS,
    "scale": {"op": "scale", "values": [[1.0, 2.0], 3.0], "dtype": "float16", "container": "list"},
    "unscale_": {"op": "unscale_", "opt": 0},
    "step": {"op": "step", "opt": 0},
    "update": {"op": "update", "new_scale": 4.0, "tensor": True},
    "clip": {"op": "clip", "opt": 0, "max_norm": 1.0},
    "params": {"op": "params", "opt": 0},
    "grads_of": {"op": "grads_of", "opt": 0},
    "load_state_dict": {"op": "load_state_dict", "state": {"scale": 4.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                                           "growth_interval": 1, "_growth_tracker": 0}},
    "call": {"op": "call", "method": "get_scale"},
}
#: One example of every op of the table.
EXAMPLES: dict[str, dict[str, Any]] = {name: WRITTEN.get(name, {"op": name}) for name in ops.OPS}
#: What a snippet ending in these ops prints last (written out here; the others are checked against their run).
PRINTS = {"scale": "list [(torch.float16, [8.0, 16.0]), (torch.float32, 24.0)]",  # a 0-d half times the scale: float32
          "unscale_": "True [[0.125, 0.25], [0.375, 0.5, 0.625]]", "step": "1001.0 1", "observe": "8.0 0",
          "state_dict": "{'scale': 8.0, 'growth_factor': 2.0, 'backoff_factor': 0.5, 'growth_interval': 1, "
                        "'_growth_tracker': 0}", "call": "8.0"}
#: The ops that run without a scaler (after a constructor that raised, the others are answered "no scaler").
WITHOUT_SCALER = {"new", "grads", "clip", "params", "grads_of"}


def scenario(name: str) -> dict[str, Any]:
    prefix = {"new": [], "grads": [NEW]}.get(name, [NEW, GRADS])
    return {"world": WORLD, "ops": [*prefix, EXAMPLES[name]]}


def test_every_op_of_the_table_is_complete() -> None:
    assert ops.incomplete() == []


def test_an_op_missing_a_part_is_named() -> None:
    broken = {"observe": dataclasses.replace(ops.OPS["observe"], reply=None),
              "update": dataclasses.replace(ops.OPS["update"], line=None),
              "clip": dataclasses.replace(ops.OPS["clip"], printed=None),
              "step": dataclasses.replace(ops.OPS["step"], run=None, printed=None)}
    assert ops.incomplete(broken) == [
        "op 'observe' has no reply",
        "op 'update' has no line",
        "op 'clip' prints its value but says nothing of how it is printed (printed)",
        "op 'step' has no run",
        "op 'step' prints its own last lines but says nothing of what they print (printed)"]


def test_the_examples_and_the_reply_tests_cover_exactly_the_table() -> None:
    from test_replies import OPS as REPLY_OPS, WRITTEN as REPLY_WRITTEN

    assert set(WRITTEN) <= set(ops.OPS), f"examples of ops the table does not have: {set(WRITTEN) - set(ops.OPS)}"
    assert {op["op"] for op in REPLY_WRITTEN} <= set(ops.OPS), "tests/test_replies.py writes out an op not in the table"
    assert sorted(EXAMPLES) == sorted({op["op"] for op in REPLY_OPS}) == sorted(ops.OPS)
    assert (EXAMPLES["observe"], EXAMPLES["state_dict"]) == ({"op": "observe"}, {"op": "state_dict"})  # derived


@pytest.fixture(scope="module")
def results() -> dict[str, list[Any]]:
    """Each example's results with the reference solution, as they cross the pipe (JSON)."""
    return {name: json.loads(json.dumps(harness.run_scaler_ops(scenario(name), reference.ToyLossScaler)))
            for name in EXAMPLES}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_each_op_runs_and_its_result_passes_the_judges_check(results: dict[str, list[Any]], name: str) -> None:
    assert all(set(result) == {"ok"} for result in results[name]), (
        f"op {name!r} does not run from its example {EXAMPLES[name]} (an op that takes fields needs its example in "
        f"WRITTEN): {results[name][-1]}")
    assert replies.problem("scaler_ops", scenario(name), results[name]) is None


def test_an_op_outside_the_table_never_runs_nor_passes() -> None:
    args = {"world": WORLD, "ops": [NEW, {"op": "get_scale"}]}
    got = harness.run_scaler_ops(args, reference.ToyLossScaler)
    assert got[1]["error"]["type"] == "ValueError" and "unknown op 'get_scale'" in got[1]["error"]["message"]
    assert replies.problem("scaler_ops", args, [got[0], {"ok": 8.0}]) == "a reply of the wrong shape"


def test_after_a_failed_constructor_only_the_ops_needing_no_scaler_run() -> None:
    names = [name for name in EXAMPLES if name != "new"]
    args = {"world": WORLD, "ops": [{"op": "new", "kwargs": {"init_scale": -1.0}},
                                    *(EXAMPLES[name] for name in names)]}
    got = harness.run_scaler_ops(args, reference.ToyLossScaler)
    assert got[0]["error"]["type"] == "ValueError"
    refused = {name for name, result in zip(names, got[1:])
               if result.get("error", {}).get("message") == "no scaler: the constructor call above failed"}
    assert refused == set(EXAMPLES) - WITHOUT_SCALER



def test_call_runs_a_method_with_a_plain_result_on_torchs_scaler_as_on_the_students() -> None:
    """The generic op: what the judge's reference (torch's GradScaler) answers passes the reply check, and the
    snippet's last line prints the value (``print(scaler.is_enabled())``)."""
    args = {"world": WORLD, "ops": [{"op": "new", "kwargs": {}}, {"op": "call", "method": "is_enabled"},
                                    {"op": "call", "method": "get_growth_interval"}]}
    got = json.loads(json.dumps(harness.run_scaler_ops(args, harness.torch_scaler)))
    assert got == [{"ok": None}, {"ok": True}, {"ok": 2000}]
    assert replies.problem("scaler_ops", args, got) is None
    assert expect.snippet(args, 1).splitlines()[-1].strip() == "print(scaler.is_enabled())"
    assert expect.shown(args["ops"][1], got[1]) == "prints True"


def test_call_passes_plain_arguments_and_its_snippet_shows_them() -> None:
    """``"args"``: plain values passed in order; torch's ``scale(2.0)`` raises ValueError (what the contract asks
    for, and the snippet's last line makes the same call); anything but a list of plain values is refused."""
    args = {"world": WORLD, "ops": [{"op": "new", "kwargs": {}}, {"op": "call", "method": "scale", "args": [2.0]},
                                    {"op": "call", "method": "scale", "args": [None]},
                                    {"op": "call", "method": "scale", "args": [[2.0]]}]}
    got = json.loads(json.dumps(harness.run_scaler_ops(args, harness.torch_scaler)))
    assert [result["error"]["type"] for result in got[1:]] == ["ValueError"] * 3
    assert got[3]["error"]["message"] == "call: [[2.0]] is not a list of plain values"
    assert "Tensor" in got[1]["error"]["message"] and replies.problem("scaler_ops", args, got) is None
    assert expect.snippet(args, 1).splitlines()[-1].strip() == "print(scaler.scale(2.0))"
    assert expect.snippet(args, 2).splitlines()[-1].strip() == "print(scaler.scale(None))"


class _Odd:
    """A scaler whose methods return what a reply may not hold."""

    def __init__(self, **kwargs: Any) -> None:
        pass

    def tensor(self) -> Any:
        import torch

        return torch.tensor(True)

    def listed(self) -> Any:
        return [1.0]

    def flag(self) -> bool:
        return False


@pytest.mark.parametrize(("method", "error"), [("tensor", "TypeError"), ("listed", "TypeError"),
                                               ("_private", "ValueError"), ("__class__", "ValueError"),
                                               ("flag.real", "ValueError"), (3, "ValueError")])
def test_call_refuses_a_result_that_is_not_plain_and_a_name_that_is_not_a_public_methods(method: Any,
                                                                                         error: str) -> None:
    args = {"world": WORLD, "ops": [{"op": "new"}, {"op": "call", "method": method}, {"op": "call", "method": "flag"}]}
    got = harness.run_scaler_ops(args, _Odd)
    assert got[1]["error"]["type"] == error and got[2] == {"ok": False}
    assert replies.problem("scaler_ops", args, got) is None  # a student's error is a well-formed reply


@pytest.mark.parametrize("value", [[True], {"a": 1}, 1j])
def test_the_judge_refuses_a_call_reply_that_is_not_a_plain_value(value: Any) -> None:
    args = {"world": WORLD, "ops": [{"op": "new"}, {"op": "call", "method": "is_enabled"}]}
    assert replies.problem("scaler_ops", args, [{"ok": None}, {"ok": value}]) == (
        "result 1 (call): a call() result that is not a bool, int, float, str or None")
    for plain in (True, 0, 1.5, float("nan"), "x", None):
        assert replies.problem("scaler_ops", args, [{"ok": None}, {"ok": plain}]) is None


_DRIVER = '''
import contextlib, io, json, sys, traceback
out = []
for program in json.load(sys.stdin):
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(program, "snippet.py", "exec"), {"__name__": "snippet"})
        out.append({"lines": printed.getvalue().splitlines()})
    except BaseException:
        out.append({"error": traceback.format_exc()})
print(json.dumps(out))
'''


def test_each_ops_snippet_prints_what_its_failure_message_says(results: dict[str, list[Any]], tmp_path: Path) -> None:
    """The snippet of every example, run in one fresh Python beside the reference solution, prints last what
    :func:`checks.judge.expect.shown` says (or prints nothing new for an op that prints nothing)."""
    shutil.copyfile(ROOT / "solutions" / "loss_scaler.py", tmp_path / "loss_scaler.py")
    programs, unwritten = [], {}
    for name in EXAMPLES:
        try:
            programs.append(textwrap.dedent(expect.snippet(scenario(name))))
        except (KeyError, TypeError, ValueError) as exc:  # a field its example lacks: named below, not a crash
            programs.append("")
            unwritten[name] = f"no snippet from its example {EXAMPLES[name]}: {type(exc).__name__} {exc}"
    done = subprocess.run([sys.executable, "-c", _DRIVER], input=json.dumps(programs), cwd=tmp_path, timeout=300,
                          capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "assignment"),
                                                               "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    ran = dict(zip(EXAMPLES, json.loads(done.stdout)))
    wrong = dict(unwritten)
    for name, output in ran.items():
        if name in unwritten:
            continue
        op, last = EXAMPLES[name], results[name][-1]
        said = expect.shown(op, last)
        if "error" in output:
            wrong[name] = output["error"][-600:]
        elif said == "runs without error":
            if name in PRINTS or ops.OPS[name].printed is not None:
                wrong[name] = f"says it prints nothing: {said!r}"
        elif said != f"prints {output['lines'][-1] if output['lines'] else ''}":
            wrong[name] = f"message: {said!r}; the snippet printed {output['lines'][-1:]}"
        elif name in PRINTS and said != f"prints {PRINTS[name]}":
            wrong[name] = f"message: {said!r}; expected prints {PRINTS[name]!r}"
    assert not wrong, wrong


class _Replying:
    """A stand-in for the local student process that answers every call with ``reply``."""

    reply: Any = None

    def __init__(self, root: Path, modules: tuple[str, ...]) -> None:
        pass

    def call(self, scenario: str, args: dict[str, Any]) -> Any:
        return self.reply

    def close(self) -> None:
        pass


def test_the_public_checks_refuse_a_malformed_reply_as_the_grader_does(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    args = scenario("observe")
    honest = harness.run_scaler_ops(args, reference.ToyLossScaler)
    forged = [*honest[:-1], {"ok": {"scale": 8.0, "tracker": 0, "forged": True}}]
    monkeypatch.setattr(serve, "LocalProcess", _Replying)
    runner = plugin.LocalRunner(tmp_path)
    _Replying.reply = {"ok": honest}
    assert runner.run("scaler_ops", args) == honest
    _Replying.reply = {"ok": forged}
    with pytest.raises(harness.SubmissionFault) as refused:
        runner.run("scaler_ops", args)
    assert str(refused.value) == ("your code's process returned something malformed (result 2 (observe): an "
                                  "observation of the wrong shape); the grader only accepts what its own checking "
                                  "code reports")
    assert sandbox.replies is plugin.replies  # the grader's sandbox checks with the very same module


def test_a_block_repeated_often_is_written_once_in_a_loop() -> None:
    """Row 1.6's 300 clean iterations paste as a loop; a short run stays written out (16 is the threshold)."""
    from checks.judge.expect import looped

    block = ["set_grads(opt0, [torch.tensor([1.0])])", "scaler.step(opt0)", "scaler.update()"]
    assert looped(["a"] + block * 300 + ["b"]) == ["a", "for _ in range(300):", *("    " + line for line in block), "b"]
    assert looped(block * 15) == block * 15
    assert looped(["x"] * 16) == ["for _ in range(16):", "    x"]
