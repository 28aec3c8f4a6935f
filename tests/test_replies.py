"""The judge's reply check (checks/judge/replies.py): exact count, order, keys and JSON types per op kind.

A reply produced by the grader's own observation code (checks.runners.harness, run here with
torch's GradScaler) passes; each way a forged or broken reply can differ from it (a result
missing, two results swapped, a key added or dropped, an int where a float belongs, a bool
where an int belongs...) is named, never accepted.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

import pytest

from checks.judge import replies
from checks.runners import harness
from checks.runners.ops import OPS as TABLE

Json = Any

WORLD = {"optimizers": [{"groups": [[2, 3]]}], "device": "cpu"}
#: An op of every kind that takes fields, in an order a training loop uses; the ops that take none follow, each as
#: ``{"op": name}`` (:data:`OPS`): a new op needs a line here only if it takes fields (else it fails below, named).
WRITTEN = [{"op": "new", "kwargs": {"init_scale": 8.0, "growth_interval": 1}},
           {"op": "grads", "opt": 0, "values": [[1.0, 2.0], [3.0, 4.0, 5.0]]},
           {"op": "scale", "values": [1.0, 2.0], "dtype": "float32", "container": "tensor"},
           {"op": "unscale_", "opt": 0},
           {"op": "clip", "opt": 0, "max_norm": 1.0},
           {"op": "step", "opt": 0},
           {"op": "update"},
           {"op": "params", "opt": 0},
           {"op": "grads_of", "opt": 0},
           {"op": "call", "method": "is_enabled"},
           {"op": "load_state_dict", "state": {"scale": 4.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                               "growth_interval": 1, "_growth_tracker": 0}}]
#: One op of every kind of the table.
OPS = WRITTEN + [{"op": name} for name in TABLE if name not in {op["op"] for op in WRITTEN}]
ARGS = {"world": WORLD, "ops": OPS}


@pytest.fixture(scope="module")
def honest() -> list[Json]:
    """What the grader's own code answers for ARGS (JSON round trip, as it crosses the pipe)."""
    reply = json.loads(json.dumps(harness.run_scaler_ops(ARGS, harness.torch_scaler)))
    failed = {op["op"]: result["error"]["message"] for op, result in zip(OPS, reply) if "ok" not in result}
    # every op ran: the mutations below start from values (an op that takes fields needs its line in WRITTEN)
    assert not failed, f"ops that did not run from their line here: {failed}"
    return reply


def index_of(kind: str) -> int:
    return next(k for k, op in enumerate(OPS) if op["op"] == kind)


def test_the_graders_own_reply_passes(honest: list[Json]) -> None:
    assert replies.problem("scaler_ops", ARGS, honest) is None
    error = {"error": {"type": "ValueError", "mro": ["ValueError", "Exception"], "message": "bad", "trace": "x"}}
    assert replies.problem("scaler_ops", ARGS, [error] + honest[1:]) is None  # any op may raise instead
    assert replies.problem("scaler_ops", ARGS, {"results": honest}) == "not a list of results"


def _set(path: tuple[Any, ...], value: Any) -> Callable[[list[Json]], None]:
    def mutate(reply: list[Json]) -> None:
        target = reply
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return mutate


def _delete(path: tuple[Any, ...]) -> Callable[[list[Json]], None]:
    def mutate(reply: list[Json]) -> None:
        target = reply
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return mutate


def _swap(first: str, second: str) -> Callable[[list[Json]], None]:
    def mutate(reply: list[Json]) -> None:
        a, b = index_of(first), index_of(second)
        reply[a], reply[b] = reply[b], reply[a]
    return mutate


OBSERVE, STEP, SCALE, UNSCALE = index_of("observe"), index_of("step"), index_of("scale"), index_of("unscale_")
PARAMS, STATE, CLIP, CALL = index_of("params"), index_of("state_dict"), index_of("clip"), index_of("call")

#: name -> (mutation of the honest reply, words the problem must hold)
MUTATIONS: dict[str, tuple[Callable[[list[Json]], None], str]] = {
    "one result missing": (lambda r: r.pop(), f"{len(OPS) - 1} results for {len(OPS)} calls"),
    "one result too many": (lambda r: r.append({"ok": None}), f"{len(OPS) + 1} results for {len(OPS)} calls"),
    "a bare value among the results": (lambda r: r.__setitem__(OBSERVE, r[OBSERVE]["ok"]),
                                       f"result {OBSERVE} is neither"),
    "observe and step swapped (order)": (_swap("observe", "step"), f"result {STEP} (step)"),
    "scale and unscale_ swapped (order)": (_swap("scale", "unscale_"), f"result {SCALE} (scale)"),
    "ok and error together": (_set((OBSERVE, "error"), {"type": "E", "mro": [], "message": "", "trace": ""}),
                              f"result {OBSERVE} is neither"),
    "a key other than ok/error": (lambda r: r.__setitem__(OBSERVE, {"value": r[OBSERVE]["ok"]}),
                                  f"result {OBSERVE} is neither"),
    "observe: extra key": (_set((OBSERVE, "ok", "forged"), True), f"result {OBSERVE} (observe)"),
    "observe: missing key": (_delete((OBSERVE, "ok", "tracker")), f"result {OBSERVE} (observe)"),
    "observe: int scale": (_set((OBSERVE, "ok", "scale"), 8), f"result {OBSERVE} (observe)"),
    "observe: bool tracker": (_set((OBSERVE, "ok", "tracker"), True), f"result {OBSERVE} (observe)"),
    "observe: float tracker": (_set((OBSERVE, "ok", "tracker"), 0.0), f"result {OBSERVE} (observe)"),
    "step: returned a string": (_set((STEP, "ok", "returned"), "1.0"), f"result {STEP} (step)"),
    "step: called is an int": (_set((STEP, "ok", "called"), 1), f"result {STEP} (step)"),
    "scale: a str among the values": (_set((SCALE, "ok", "items", 0, "values", 0), "1.0"), f"result {SCALE} (scale)"),
    "scale: item without dtype": (_delete((SCALE, "ok", "items", 0, "dtype")), f"result {SCALE} (scale)"),
    "unscale_: in_place is a str": (_set((UNSCALE, "ok", "in_place"), "yes"), f"result {UNSCALE} (unscale_)"),
    "params: an int among the values": (_set((PARAMS, "ok", 0, 0), 1), f"result {PARAMS} (params)"),
    "clip: an int": (_set((CLIP, "ok"), 1), f"result {CLIP} (clip)"),
    "call: a list": (_set((CALL, "ok"), [True]), f"result {CALL} (call)"),
    "call: a dict": (_set((CALL, "ok"), {"enabled": True}), f"result {CALL} (call)"),
    "state_dict: a nested value": (_set((STATE, "ok", "scale"), [8.0]), f"result {STATE} (state_dict)"),
    "new: returned a value": (_set((0, "ok"), {"forged": 1}), "result 0 (new)"),
    "error record: missing trace": (lambda r: r.__setitem__(0, {"error": {"type": "E", "mro": [], "message": ""}}),
                                    "result 0 (new): an error record"),
    "error record: mro not a list": (lambda r: r.__setitem__(0, {"error": {"type": "E", "mro": "E", "message": "",
                                                                           "trace": ""}}), "wrong types"),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_reply_that_differs_is_named_never_accepted(honest: list[Json], name: str) -> None:
    mutate, words = MUTATIONS[name]
    reply = copy.deepcopy(honest)
    mutate(reply)
    found = replies.problem("scaler_ops", ARGS, reply)
    assert found is not None and words in found, found


# --------------------------------------------------------------------------- the other scenarios' records

ERROR = {"type": "RuntimeError", "mro": ["RuntimeError"], "message": "m", "trace": "t"}
OTHERS: dict[str, tuple[Json, list[Json]]] = {  # scenario -> (a well-formed reply, malformed variants)
    "amp_probe": ({"log": [{"event": "forward"}], "steps": [{
        "ok": {"type": "Tensor", "dtype": "float32", "requires_grad": False, "numel": 1, "value": 0.5},
        "params": [[1.0, 2.0], "not a plain tensor: a Liar"], "grads": [None, [0.5]], "backward_grads": [[0.5], None],
        "scaler": {"scale": 8.0, "tracker": 0, "stage": 0}}]},
                  [{"log": [], "steps": [], "extra": 1}, {"log": [{"event": 1}], "steps": []},
                   {"log": [], "steps": [{"ok": {"type": "float", "value": 1}, "params": [], "grads": [],
                                          "backward_grads": [], "scaler": None}]},
                   {"log": [], "steps": [{"ok": {"type": "Tensor", "requires_grad": "no"}, "params": [], "grads": [],
                                          "backward_grads": [], "scaler": None}]},
                   {"log": [], "steps": [{"ok": {"type": "Tensor"}, "params": [[1]], "grads": [None],
                                          "backward_grads": [None], "scaler": None}]},
                   {"log": [], "steps": [{"ok": {"type": "Tensor"}, "params": [], "grads": [], "backward_grads": [],
                                          "scaler": {"scale": 8.0, "tracker": 0}}]},
                   {"log": [], "steps": [{"ok": {"type": "Tensor"}, "params": [], "grads": [], "scaler": None}]},
                   {"log": [], "steps": [{"error": {"type": "E"}, "params": [], "grads": [], "backward_grads": [],
                                          "scaler": None}]}]),
    "underflow": ({"ok": None, "losses": [1.0, 0.5], "final_weight": [0.5, -0.25], "log": [{"event": "backward"}],
                   "calls": [{"weight": [0.5, -0.25], "grad": None, "scaler": None}]},
                  [{"ok": None, "losses": [1, 0.5], "final_weight": [0.5]}, {"ok": None, "losses": [1.0], "final_weight": 0.5},
                   {"ok": None, "losses": [1.0], "final_weight": [0.5], "final_loss": 0.0},
                   {"losses": [1.0], "final_weight": [0.5]},
                   {"error": ERROR, "ok": None, "losses": "x", "final_weight": None}]),
    "gpu_train": ({"ok": None, "weights": ["AACAPw==", ""]},
                  [{"ok": None, "weights": [[1.0]]}, {"ok": None}, {"weights": ["AACAPw=="]},
                   {"ok": None, "weights": ["AACAPw=="], "time_ms": 1.0}, {"ok": None, "weights": 3}]),
    "gpu_train_fp32": ({"ok": None, "weights": "not a plain tensor: a Liar"},
                       [{"ok": None, "weights": None}, {"ok": None, "weights": [None]}]),
    "gpu_underflow": ({"ok": None, "final_weight": [0.5, -0.25], "weights": [[0.5, -0.25]], "device_info": {"name": "x"}},
                      [{"ok": None, "final_weight": [0.5]}, {"ok": None, "final_weight": [1], "device_info": {}},
                       {"ok": None, "final_weight": [0.5], "weights": [[0.5], {"a": 1}], "device_info": {}},
                       {"ok": None, "final_weight": [0.5], "weights": None, "device_info": {}},
                       {"ok": None, "final_weight": [0.5], "weights": [[0.5]], "device_info": {}, "steps": 1},
                       {"ok": None, "final_weight": [0.5], "device_info": {}, "losses": [0.0]},
                       {"ok": None, "final_weight": [0.5], "device_info": []}]),
}


@pytest.mark.parametrize("scenario", list(OTHERS))
def test_other_scenarios_check_their_records(scenario: str) -> None:
    good, bad = OTHERS[scenario]
    assert replies.problem(scenario, {}, good) is None
    accepted = [variant for variant in bad if replies.problem(scenario, {}, variant) is None]
    assert accepted == []


def test_a_gpu_grader_fault_is_accepted_only_as_exactly_that() -> None:
    fault = {"grader_fault": {"type": "RuntimeError", "message": "no CUDA", "trace": ""}}
    assert replies.problem("gpu_scaler_ops", ARGS, fault) is None
    assert replies.problem("scaler_ops", ARGS, fault) is not None  # not on the CPU scenarios
    assert replies.problem("gpu_scaler_ops", ARGS, {**fault, "ok": []}) is not None
    for bad in ({}, {"type": "RuntimeError", "message": "no CUDA"}, {"type": 1, "message": "", "trace": ""}, "x"):
        assert replies.problem("gpu_train", ARGS, {"grader_fault": bad}) is not None, bad
