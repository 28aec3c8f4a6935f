"""What a student process may answer: the judge checks every reply before a test reads it.

The student process runs the grader's own observation code, but the judge trusts
nothing that crosses the pipe: a reply must have exactly the shape the scenario's
runner produces (:mod:`checks.runners.harness`, :mod:`checks.runners.probes`): one result per
op, in order, with the keys and JSON types of that op kind (its ``reply`` in
:data:`checks.runners.ops.OPS`).  :func:`problem` names the first mismatch; the runner then
fails the test with :func:`malformed`.  A mismatch never passes a test and never counts as a
grader fault.  The grader's sandbox and the public checks' runner (:mod:`checks.plugin`) call the
same :func:`problem`, so a reply the grader refuses is refused locally too.
"""

from __future__ import annotations

from typing import Any, Callable

from checks.runners.ops import OPS, error_problem as _error, floats as _floats, is_float as _is_float

Json = Any


def malformed(problem: str) -> str:
    """The fault a malformed reply fails its test with (in the grader and the public checks alike)."""
    return (f"your code's process returned something malformed ({problem}); "
            "the grader only accepts what its own checking code reports")


def _scaler_ops(args: dict[str, Json], reply: Json) -> str | None:
    ops = args["ops"]
    if not isinstance(reply, list):
        return "not a list of results"
    if len(reply) != len(ops):
        return f"{len(reply)} results for {len(ops)} calls"
    for index, (op, result) in enumerate(zip(ops, reply)):
        if not (isinstance(result, dict) and len(result) == 1 and set(result) <= {"ok", "error"}):
            return f"result {index} is neither a value nor an error"
        found = _error(result["error"]) if "error" in result else OPS[op["op"]].reply(result["ok"])
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
