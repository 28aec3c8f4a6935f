"""What a student process may answer: the judge checks every reply before a test reads it.

The student process runs the grader's own observation code, but the judge trusts
nothing that crosses the pipe: a reply must have exactly the shape the scenario's
runner produces (:mod:`checks.runners.harness`, :mod:`checks.runners.probes`): one result per
op, in order, with the keys and JSON types of that op kind.  :func:`problem`
names the first mismatch; the runner then fails the test with "your code's
process returned something malformed".  A mismatch never passes a test and never
counts as a grader fault.
"""

from __future__ import annotations

from typing import Any, Callable

Json = Any
Check = Callable[[Json], "str | None"]


def _is_float(value: Json) -> bool:
    return isinstance(value, float)


def _floats(value: Json) -> bool:
    return isinstance(value, list) and all(_is_float(v) for v in value)


def _error(value: Json) -> str | None:
    if not (isinstance(value, dict) and set(value) == {"type", "mro", "message", "trace"}):
        return "an error record without exactly type, mro, message and trace"
    if not (isinstance(value["type"], str) and isinstance(value["message"], str) and isinstance(value["trace"], str)
            and isinstance(value["mro"], list) and all(isinstance(m, str) for m in value["mro"])):
        return "an error record with wrong types"
    return None


def _none(value: Json) -> str | None:
    return None if value is None else "a value where the op returns nothing"


def _grads(value: Json) -> bool:
    return isinstance(value, list) and all(v is None or _floats(v) for v in value)


def _scale(value: Json) -> str | None:
    if not (isinstance(value, dict) and set(value) == {"container", "items"} and isinstance(value["container"], str)
            and isinstance(value["items"], list)):
        return "a scale() record of the wrong shape"
    for item in value["items"]:
        if not (isinstance(item, dict) and set(item) == {"dtype", "values"} and isinstance(item["dtype"], str)
                and _floats(item["values"])):
            return "a scale() item of the wrong shape"
    return None


def _unscale(value: Json) -> str | None:
    ok = isinstance(value, dict) and set(value) == {"in_place", "grads"} and isinstance(value["in_place"], bool)
    return None if ok and _grads(value["grads"]) else "an unscale_() record of the wrong shape"


def _step(value: Json) -> str | None:
    ok = (isinstance(value, dict) and set(value) == {"called", "returned"} and isinstance(value["called"], bool)
          and (value["returned"] is None or _is_float(value["returned"])))
    return None if ok else "a step() record of the wrong shape"


def _observe(value: Json) -> str | None:
    ok = (isinstance(value, dict) and set(value) == {"scale", "tracker"} and _is_float(value["scale"])
          and type(value["tracker"]) is int)
    return None if ok else "an observation of the wrong shape"


def _state(value: Json) -> str | None:
    ok = isinstance(value, dict) and all(isinstance(k, str) and (v is None or type(v) in (int, float, bool, str))
                                         for k, v in value.items())
    return None if ok else "a state_dict record of the wrong shape"


OP_RESULTS: dict[str, Check] = {
    "new": _none, "grads": _none, "update": _none, "load_state_dict": _none,
    "params": lambda v: None if isinstance(v, list) and all(_floats(p) for p in v) else "a params record of the wrong shape",
    "grads_of": lambda v: None if _grads(v) else "a gradients record of the wrong shape",
    "clip": lambda v: None if _is_float(v) else "a clip_grad_norm_ result that is not a float",
    "scale": _scale, "unscale_": _unscale, "step": _step, "observe": _observe, "state_dict": _state,
}


def _scaler_ops(args: dict[str, Json], reply: Json) -> str | None:
    ops = args["ops"]
    if not isinstance(reply, list):
        return "not a list of results"
    if len(reply) != len(ops):
        return f"{len(reply)} results for {len(ops)} calls"
    for index, (op, result) in enumerate(zip(ops, reply)):
        if not (isinstance(result, dict) and len(result) == 1 and set(result) <= {"ok", "error"}):
            return f"result {index} is neither a value nor an error"
        found = _error(result["error"]) if "error" in result else OP_RESULTS[op["op"]](result["ok"])
        if found:
            return f"result {index} ({op['op']}): {found}"
    return None


def _outcome(value: Json, extra: set[str]) -> str | None:
    """A guarded call's record: ``ok`` or ``error``, plus the keys ``extra``."""
    if not isinstance(value, dict) or not ({"ok", "error"} & set(value)) or not set(value) <= {"ok", "error"} | extra:
        return "a call record of the wrong shape"
    return _error(value["error"]) if "error" in value else None


def _copied_tensor(value: Json) -> bool:
    """A tensor copied out by the harness: its values, or a note saying why they were not copied."""
    return isinstance(value, str) or _floats(value)


def _returned(value: Json) -> str | None:
    """What amp_step returned (checks.runners.probes.describe_returned)."""
    if not (isinstance(value, dict) and isinstance(value.get("type"), str)
            and set(value) <= {"type", "dtype", "requires_grad", "numel", "value"}):
        return "a returned-value record of the wrong shape"
    typed = {"dtype": str, "requires_grad": bool, "numel": int}
    if any(key in value and type(value[key]) is not kind for key, kind in typed.items()):
        return "a returned-value record with wrong types"
    if "value" in value and not (value["value"] is None or _is_float(value["value"])):
        return "a returned value that is not a float"
    return None


def _scaler_state(value: Json) -> bool:
    return value is None or (isinstance(value, dict) and set(value) == {"scale", "tracker", "stage"}
                             and _is_float(value["scale"]) and type(value["tracker"]) is int
                             and type(value["stage"]) is int)


def _amp_probe(_args: dict[str, Json], reply: Json) -> str | None:
    if not (isinstance(reply, dict) and set(reply) == {"log", "steps"} and isinstance(reply["log"], list)
            and isinstance(reply["steps"], list)):
        return "a probe record of the wrong shape"
    if not all(isinstance(e, dict) and isinstance(e.get("event"), str) for e in reply["log"]):
        return "a probe log entry of the wrong shape"
    for step in reply["steps"]:
        effects = {"params", "grads", "backward_grads", "scaler"}
        found = _outcome(step, effects)
        if found:
            return found
        grads = ("grads", "backward_grads")
        if not (set(step) >= effects and isinstance(step["params"], list)
                and all(_copied_tensor(p) for p in step["params"])
                and all(isinstance(step[k], list) and all(g is None or _copied_tensor(g) for g in step[k]) for k in grads)
                and _scaler_state(step["scaler"])):
            return "a probe step's effects of the wrong shape"
        if "ok" in step:
            found = _returned(step["ok"])
            if found:
                return found
    return None


def _underflow_call(value: Json) -> bool:
    """One call's record in the underflow run (checks.runners.probes.run_underflow)."""
    state = value.get("scaler") if isinstance(value, dict) else None
    return (isinstance(value, dict) and set(value) - {"error"} == {"weight", "grad", "scaler"}
            and ("error" not in value or _error(value["error"]) is None) and _copied_tensor(value["weight"])
            and (value["grad"] is None or _copied_tensor(value["grad"]))
            and (state is None or (isinstance(state, dict) and _scaler_state({k: v for k, v in state.items()
                                                                                if k != "found_inf"})
                                   and "found_inf" in state and (state["found_inf"] is None
                                                                 or _is_float(state["found_inf"])))))


def _underflow(_args: dict[str, Json], reply: Json) -> str | None:
    found = _outcome(reply, {"losses", "final_weight", "log", "calls"})
    if found:
        return found
    if not _floats(reply.get("losses")) or not _copied_tensor(reply.get("final_weight")):
        return "a list of losses or a final weight of the wrong shape"
    if not (isinstance(reply.get("log"), list) and all(isinstance(e, dict) and isinstance(e.get("event"), str)
                                                       for e in reply["log"])):
        return "an underflow log of the wrong shape"
    if not (isinstance(reply.get("calls"), list) and all(_underflow_call(c) for c in reply["calls"])):
        return "an underflow call record of the wrong shape"
    return None


def _gpu_train(_args: dict[str, Json], reply: Json) -> str | None:
    """checks.runners.gpu_runs.run_train: ok/error and the weights (base64 strings, or a note)."""
    found = _outcome(reply, {"weights"})
    if found:
        return found
    weights = reply.get("weights")
    if not (isinstance(weights, str) or (isinstance(weights, list) and all(isinstance(w, str) for w in weights))):
        return "copied-out weights of the wrong shape"
    return None


def _gpu_underflow(_args: dict[str, Json], reply: Json) -> str | None:
    """checks.runners.gpu_runs.run_gpu_underflow: ok/error, the final weight, the weight after each step and the
    device's facts."""
    found = _outcome(reply, {"final_weight", "weights", "device_info"})
    if found:
        return found
    if not _copied_tensor(reply.get("final_weight")) or not isinstance(reply.get("device_info"), dict):
        return "a final weight or device facts of the wrong shape"
    if "weights" in reply and not (isinstance(reply["weights"], list) and all(_copied_tensor(w) for w in reply["weights"])):
        return "step weights of the wrong shape"  # (missing, the judge fails the row: no step to replay)
    return None


def _plain_record(_args: dict[str, Json], reply: Json) -> str | None:
    return None if isinstance(reply, dict) else "not a record"


SCENARIOS: dict[str, Callable[[dict[str, Json], Json], "str | None"]] = {
    "scaler_ops": _scaler_ops, "amp_probe": _amp_probe, "underflow": _underflow,
    "gpu_scaler_ops": _scaler_ops, "gpu_train": _gpu_train, "gpu_train_fp32": _gpu_train,
    "gpu_underflow": _gpu_underflow,
}


def _grader_fault(_args: dict[str, Json], reply: Json) -> str | None:
    """A claimed device failure (checks.runners.gpu_runs.grader_fault): three strings, which the judge checks with
    its own canary before believing any of it."""
    fault = reply["grader_fault"]
    if not (isinstance(fault, dict) and set(fault) == {"type", "message", "trace"}
            and all(isinstance(value, str) for value in fault.values())):
        return "a device-failure record of the wrong shape"
    return None


def problem(scenario: str, args: dict[str, Json], reply: Json) -> str | None:
    """The first way ``reply`` differs from what ``scenario``'s runner produces for ``args``, or None."""
    check = SCENARIOS.get(scenario, _plain_record)
    if scenario.startswith("gpu_") and isinstance(reply, dict) and set(reply) == {"grader_fault"}:
        check = _grader_fault  # a device failure outside the student's code (checks/runners/gpu_runs.py)
    try:
        return check(args, reply)
    except (KeyError, TypeError, AttributeError):
        return "a reply of the wrong shape"
