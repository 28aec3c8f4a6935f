"""One deviation, one row: which behaviour the first call that differs from torch's scaler exercises, and the row
that grades it.

:func:`kind` names the behaviour of the first differing call of a sequence (:mod:`checks.judge.sequences`) and
:data:`ROWS` the row (by its test's name) that grades it.  The differential row charges only the kinds no other
row's own inputs reach (:data:`DIFFERENTIAL`); the others are left to their rows, so a mistake another row catches
costs no second deduction.  docs/validation.md says why, and how the catalogue proves each kind is caught where it
is charged.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from checks.judge import expect
from checks.judge.cases import float32

Json = Any

#: The differential row's test (row 1.11): the kinds of deviation that no other row's inputs reach are its own.
DIFFERENTIAL = "test_matches_torch_gradscaler"

#: The row charged with a deviation, by the kind of its first differing call (:func:`kind`): declared once, here.
ROWS: dict[str, str] = {
    "constructor": "test_constructor_rejects_bad_arguments",  # 1.1: a valid constructor call raised
    "scale": "test_scale_returns_float32_without_overflow",  # 1.2: scale() of a tensor
    "container": "test_scale_lists_and_tuples",  # 1.15: scale() of a list or tuple
    "unscale": "test_unscale_divides_grads_in_place",  # 1.3: unscaled gradients (first param group), in place
    "step": "test_step_is_skipped_on_inf_or_nan",  # 1.4: step() skipped on inf in every gradient, its result
    "detection": "test_unscale_bit_exact",  # 1.12: inf/NaN found (or not) anywhere, before unscaling
    "backoff": "test_update_backs_off_after_inf_or_nan",  # 1.5: an update after one overflowing gradient
    "backoffs": "test_one_backoff_per_update",  # 1.10: an update after several overflowing gradients
    "growth": "test_update_rule_properties",  # 1.6: a clean update from a tracker below the interval
    "rounding": "test_update_rule_non_power_of_two_factors",  # 1.7: a scale not rounded to float32
    "growth_to_inf": "test_growth_skipped_when_float32_would_overflow",  # 1.8
    "new_scale": "test_update_new_scale_keeps_tracker",  # 1.9: update(new_scale=<float>)
    "misuse": "test_misuse_raises_runtime_error",  # 1.13: a call the contract forbids did not raise RuntimeError
    "float16": "test_float16_grads_rejected",  # 1.14
    "state": "test_state_dict_round_trip",  # 1.16: state_dict()'s keys and values, load_state_dict()
    "defaults": "test_defaults_and_restored_state",  # 1.18: a constructor default
    # The kinds no other row's inputs reach: the differential row's own.
    "reciprocal": DIFFERENTIAL,  # gradients one rounding off: divided by the scale, not times its float32 reciprocal
    "groups": DIFFERENTIAL,  # gradients that differ only outside an optimizer's first param group
    "restored": DIFFERENTIAL,  # a tracker restored at or above the interval (load_state_dict), or an update from it
    "new_scale_tensor": DIFFERENTIAL,  # update(new_scale=<one-element tensor>)
    "other": DIFFERENTIAL,  # anything else
}


def _close_rounding(want: Json, have: Json) -> bool:
    """Whether two gradient or parameter records differ only by rounding (relative 1e-6, finite values)."""
    if isinstance(want, list) and isinstance(have, list):
        return len(want) == len(have) and all(_close_rounding(w, h) for w, h in zip(want, have))
    if isinstance(want, float) and isinstance(have, float):
        return want == have or (math.isfinite(want) and math.isfinite(have) and math.isclose(want, have, rel_tol=1e-6))
    return want == have


def _values_kind(args: dict[str, Json], expected: Sequence[dict[str, Json]], index: int, want: list[Json],
                 have: Json) -> str:
    """The kind of a difference in an optimizer's gradients or parameters (one record per parameter)."""
    if not isinstance(have, list) or len(have) != len(want):
        return "unscale"
    opt = args["ops"][index]["opt"]
    first_group = len(args["world"]["optimizers"][opt]["groups"][0])
    differing = [i for i, (w, h) in enumerate(zip(want, have)) if not expect.close(w, h)]
    if all(_close_rounding(want[i], have[i]) for i in differing):
        return "reciprocal"
    # only later groups differ, though the first group held a finite gradient that would show a wrong unscaling
    grads = _walk(args, expected, index)["grads"].get(opt, [])
    shown = any(g is not None and any(math.isfinite(v) and v != 0 for v in g) for g in grads[:first_group])
    return "groups" if shown and all(i >= first_group for i in differing) else "unscale"


def _walk(args: dict[str, Json], expected: Sequence[dict[str, Json]], upto: int) -> dict[str, Json]:
    """What torch's run had seen before call ``upto``: the last state-changing call, its last observation and
    state_dict, the gradients set, and the overflowing gradients each optimizer unscaled since the last update."""
    seen: dict[str, Json] = {"cause": None, "observe": None, "state": None, "grads": {}, "overflowing": {}}
    for index, (op, result) in enumerate(zip(args["ops"][:upto], expected[:upto])):
        kind, ok = op["op"], "ok" in result
        if kind in ("new", "update", "load_state_dict"):
            seen["cause"] = index
            if kind == "update" and ok:
                seen["overflowing"] = {}
            if kind == "load_state_dict" and ok:  # what torch holds now, whether or not a read follows
                seen["state"] = op["state"]
                seen["observe"] = {"scale": float32(float(op["state"]["scale"])),
                                   "tracker": op["state"]["_growth_tracker"]}
        elif kind == "observe" and ok:
            seen["observe"] = result["ok"]
        elif kind == "state_dict" and ok:
            seen["state"] = result["ok"]
        elif kind == "grads":
            seen["grads"][op["opt"]] = op["values"]
        elif kind in ("unscale_", "step") and ok and op["opt"] not in seen["overflowing"]:
            grads = seen["grads"].get(op["opt"], [])
            seen["overflowing"][op["opt"]] = sum(1 for g in grads if g is not None and not all(map(math.isfinite, g)))
    return seen


def _update_kind(args: dict[str, Json], expected: Sequence[dict[str, Json]], cause: int, have: Json) -> str:
    """The kind of a wrong state after the update at ``cause`` (``have``: the student's observation, if any)."""
    op = args["ops"][cause]
    if op.get("new_scale") is not None:
        return "new_scale_tensor" if op.get("tensor") else "new_scale"
    before = _walk(args, expected, cause)
    want = expected[cause + 1].get("ok") if cause + 1 < len(expected) else None
    if isinstance(want, dict) and isinstance(have, dict) and isinstance(have.get("scale"), float):
        if have["scale"] != want.get("scale") and math.isclose(have["scale"], want.get("scale", math.nan), rel_tol=1e-6):
            return "rounding"
    overflowing = sum(before["overflowing"].values())
    if overflowing:
        return "backoffs" if overflowing > 1 else "backoff"
    observed, state = before["observe"] or {}, before["state"] or {}
    interval = state.get("growth_interval")
    tracker = observed.get("tracker")
    if isinstance(interval, int) and isinstance(tracker, int):
        if tracker >= interval:
            return "restored"
        if tracker + 1 == interval and not math.isfinite(float32(observed["scale"] * state["growth_factor"])):
            return "growth_to_inf"
    return "growth"


def _read_kind(args: dict[str, Json], expected: Sequence[dict[str, Json]], got: Sequence[dict[str, Json]],
               index: int) -> str:
    """The kind of a differing ``observe`` or ``state_dict``: that of the call that changed the state before it."""
    op, want, have = args["ops"][index], expected[index], got[index]
    if "error" in have or "error" in want:
        return "state"
    cause = _walk(args, expected, index)["cause"]
    if op["op"] == "state_dict" and (not isinstance(have["ok"], dict) or sorted(have["ok"]) != sorted(want["ok"])):
        return "state"
    changer = args["ops"][cause]
    if changer["op"] == "load_state_dict" and changer["state"]["_growth_tracker"] >= changer["state"]["growth_interval"]:
        return "restored"
    if changer["op"] == "update":
        observed = have["ok"] if op["op"] == "observe" else None
        return _update_kind(args, expected, cause, observed)
    wrong = [key for key in want["ok"] if not expect.close(want["ok"][key], have["ok"].get(key))]
    scale_key = "scale"
    if wrong == [scale_key] and isinstance(have["ok"][scale_key], float) and \
            math.isclose(have["ok"][scale_key], want["ok"][scale_key], rel_tol=1e-6):
        return "rounding"
    if changer["op"] == "new":
        given = set(changer.get("kwargs", {}))
        names = {"scale": "init_scale", "tracker": "", "_growth_tracker": ""}
        if all(names.get(key, key) not in given and names.get(key, key) for key in wrong):
            return "defaults"
    return "state"


def kind(args: dict[str, Json], expected: Sequence[dict[str, Json]], got: Sequence[dict[str, Json]],
         index: int) -> str:
    """The kind of behaviour (a key of :data:`ROWS`) that the differing call ``index`` exercises."""
    op, want, have = args["ops"][index], expected[index], got[index]
    name = op["op"]
    if name == "new":
        return "constructor"
    if name == "scale":
        return "scale" if op.get("container", "tensor") == "tensor" else "container"
    if name in ("observe", "state_dict"):
        return _read_kind(args, expected, got, index)
    if name == "load_state_dict":
        return "state"
    if name == "update":
        return _update_kind(args, expected, index, None)
    if "error" in want:  # unscale_ or step: the contract's errors
        return "float16" if want["error"]["type"] == "ValueError" else "misuse"
    if "error" in have:  # an error where torch has none: a state an update left wrong, or the unscaling itself
        seen = _walk(args, expected, index)
        cause = seen["cause"]
        if name in ("unscale_", "step") and args["ops"][cause]["op"] == "update":
            return _update_kind(args, expected, cause, None)
        return "unscale"
    if name == "step":
        if want["ok"]["called"] == have["ok"].get("called"):
            return "step"  # what it returned
        grads = _walk(args, expected, index)["grads"].get(op["opt"], [])
        present = [g for g in grads if g is not None]
        every_inf = bool(present) and all(any(math.isinf(v) for v in g) for g in present)
        return "step" if every_inf else "detection"
    if name == "unscale_":
        if want["ok"]["in_place"] != have["ok"].get("in_place"):
            return "unscale"
        return _values_kind(args, expected, index, want["ok"]["grads"], have["ok"].get("grads"))
    if name in ("params", "grads_of"):
        return _values_kind(args, expected, index, want["ok"], have["ok"])
    return "other"


def charged(args: dict[str, Json], expected: Sequence[dict[str, Json]], got: Sequence[dict[str, Json]],
            index: int) -> str:
    """The test (its row) charged with the deviation whose first differing call is ``index``."""
    return ROWS[kind(args, expected, got, index)]
