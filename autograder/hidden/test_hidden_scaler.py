"""Hidden checks for Task 1 (ToyLossScaler).  Never shipped to students."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checks import expect, scenarios
from checks.harness import SubmissionFault
from autograder.engine.static_checks import forbidden_delegation


@given(kwargs=scenarios.scaler_kwargs(), data=st.data())
def test_update_rule_properties(student: Any, kwargs: dict[str, Any], data: st.DataObject) -> None:
    opts = data.draw(st.integers(1, 3))
    runs = data.draw(st.lists(st.lists(st.integers(0, opts - 1), max_size=opts), min_size=1, max_size=10))
    w = scenarios.world([[[2]]] * opts)
    sizes = [scenarios.param_sizes(w, opt) for opt in range(opts)]
    ops = [{"op": "new", "kwargs": kwargs}, {"op": "observe"}]
    for overflow_in in runs:
        ops += scenarios.iteration_ops(opts, overflow_in, sizes)
    args = {"world": w, "ops": ops}
    scenarios.check_update_rule(args, student.run("scaler_ops", args), kwargs, [bool(r) for r in runs],
                         "update() must back off on any inf/NaN (in any optimizer) and grow after exactly "
                         "growth_interval clean updates in a row, resetting the tracker each time.")


@given(kwargs=scenarios.scaler_kwargs(powers_of_two=False), overflows=scenarios.overflow_runs)
def test_update_rule_non_power_of_two_factors(student: Any, kwargs: dict[str, Any], overflows: list[bool]) -> None:
    args = scenarios.run_args(kwargs, overflows)
    scenarios.check_update_rule(args, student.run("scaler_ops", args), kwargs, overflows,
                         "Each new scale is the float64 product rounded to float32, as torch stores it.")


@given(exponent=st.integers(120, 127), growth=st.sampled_from([2.0, 4.0, 1e10]))
def test_growth_skipped_when_float32_would_overflow(student: Any, exponent: int, growth: float) -> None:
    kwargs = {"init_scale": 2.0**exponent, "growth_factor": growth, "growth_interval": 1}
    args = scenarios.run_args(kwargs, [False] * 4)
    scenarios.check_update_rule(args, student.run("scaler_ops", args), kwargs, [False] * 4,
                         "Growth that would overflow float32 must be skipped (the scale stays finite) while "
                         "the tracker still resets.")


@given(kwargs=scenarios.scaler_kwargs(), clean=st.integers(0, 3), new_scale=scenarios.power_of_two_scales,
       after=st.lists(st.booleans(), max_size=3))
def test_update_new_scale_keeps_tracker(student: Any, kwargs: dict[str, Any], clean: int, new_scale: float,
                                        after: list[bool]) -> None:
    kwargs = {**kwargs, "growth_interval": 5}
    args = scenarios.run_args(kwargs, [False] * clean)
    sizes = [scenarios.param_sizes(args["world"], 0)]
    iteration = scenarios.iteration_ops(1, [], sizes)
    args["ops"] += iteration[:-2] + [{"op": "update", "new_scale": new_scale}, {"op": "observe"}]
    for overflow in after:  # the next iterations must start from a clean per-optimizer state
        args["ops"] += scenarios.iteration_ops(1, [0] if overflow else [], sizes)
    expect.check_results(args, scenarios.torch_results(args), student.run("scaler_ops", args),
                         only=["observe", "step", "update"],
                         what="update(new_scale) sets the scale, leaves the growth tracker alone and, like every "
                              "update(), clears the per-optimizer state for the next iteration.")


@given(opts=st.integers(1, 3), bad_params=st.integers(1, 4), special=st.sampled_from(scenarios.SPECIALS))
def test_one_backoff_per_update(student: Any, opts: int, bad_params: int, special: float) -> None:
    w = scenarios.world([[[1] * 4]] * opts)
    grads = [[special]] * bad_params + [[1.0]] * (4 - bad_params)
    ops: list[dict[str, Any]] = [{"op": "new", "kwargs": {"init_scale": 1024.0}}]
    ops += [{"op": "grads", "opt": opt, "values": grads} for opt in range(opts)]
    ops += [{"op": "step", "opt": opt} for opt in range(opts)] + [{"op": "update"}, {"op": "observe"}]
    args = {"world": w, "ops": ops}
    expect.check_results(args, scenarios.torch_results(args), student.run("scaler_ops", args), only=["observe", "step"],
                         what="However many gradients (and optimizers) overflow, one update() backs off once.")


@given(powers_of_two=st.booleans(), data=st.data())
def test_matches_torch_gradscaler(student: Any, powers_of_two: bool, data: st.DataObject) -> None:
    scenario = data.draw(scenarios.generated_scenarios(powers_of_two))
    expected, got = scenarios.torch_results(scenario), student.run("scaler_ops", scenario)
    what = ("Your scaler must behave exactly like torch.amp.GradScaler('cpu') on this run: the same scale, "
            "tracker and skipped steps (exactly for power-of-two factors, to 1e-6 otherwise), parameters to 1e-6.")
    expect.check_results(scenario, expected, got, rel=0.0 if powers_of_two else 1e-6, only=["observe", "step"], what=what)
    expect.check_results(scenario, expected, got, rel=1e-6, what=what)


@given(scale=scenarios.power_of_two_scales, special=st.sampled_from(scenarios.SPECIALS + (None,)),
       where=st.integers(0, 6))
def test_unscale_bit_exact(student: Any, scale: float, special: float | None, where: int) -> None:
    grads: list[list[float]] = [[1.0, 2.0, 3.0], [1e-30, -3e38, -3e38, 7.0]]  # finite, but their sum overflows
    if special is not None:
        flat = [(0, j) for j in range(3)] + [(1, j) for j in range(4)]
        i, j = flat[where]
        grads[i][j] = special
    args = {"world": scenarios.world([[[3, 4], [2]]]),
            "ops": [{"op": "new", "kwargs": {"init_scale": scale}},
                    {"op": "grads", "opt": 0, "values": grads + [None]},
                    {"op": "unscale_", "opt": 0}, {"op": "step", "opt": 0}, {"op": "grads_of", "opt": 0},
                    {"op": "update"}, {"op": "observe"}]}
    expect.check_results(args, scenarios.torch_results(args), student.run("scaler_ops", args),
                         what="unscale_() multiplies by the float32 reciprocal of the scale (bit-exact for powers "
                              "of two), notices +inf, -inf and NaN in any gradient (finite values whose sum would "
                              "overflow are not inf), and skips None grads.")


MISUSES = {
    "unscale_ twice": ["unscale_", "unscale_"],
    "unscale_ after step": ["step", "unscale_"],
    "step twice": ["step", "step"],
    "update without step": ["update", "update"],
}


@given(misuse=st.sampled_from(sorted(MISUSES)))
def test_misuse_raises_runtime_error(student: Any, misuse: str) -> None:
    ops: list[dict[str, Any]] = [{"op": "new", "kwargs": {}},
                                 {"op": "grads", "opt": 0, "values": [[1.0, 2.0]]}]
    ops += [{"op": kind, "opt": 0} if kind != "update" else {"op": "update"} for kind in MISUSES[misuse]]
    if misuse == "update without step":
        ops = ops[:2] + [{"op": "step", "opt": 0}, {"op": "update"}, {"op": "update"}]
    args = {"world": scenarios.world([[[2]]]), "ops": ops}
    results = student.run("scaler_ops", args)
    what = f"{misuse}: the first call is fine, the second must raise RuntimeError."
    expect.no_errors(args, results[:-1], what)
    if not expect.raised(results[-1], "RuntimeError"):
        expect.fail(f"{what}\nAfter running:\n{expect.snippet(args)}\nthe last call {expect.describe(results[-1])}")


def test_float16_grads_rejected(student: Any) -> None:
    w = scenarios.world([[[2]]])
    w["optimizers"][0]["dtype"] = "float16"  # as after model.half()
    args = {"world": w,
            "ops": [{"op": "new", "kwargs": {}}, {"op": "grads", "opt": 0, "values": [[1.0, 2.0]], "dtype": "float16"},
                    {"op": "unscale_", "opt": 0}]}
    results = student.run("scaler_ops", args)
    expect.no_errors(args, results[:-1])
    result = results[-1]
    if not expect.raised(result, "ValueError"):
        expect.fail(f"unscale_() must raise ValueError for float16 gradients.\nAfter running:\n{expect.snippet(args)}\n"
                    f"the last call {expect.describe(result)}")


@given(values=st.lists(st.sampled_from([0.5, 3.0, 1000.0, 60000.0]), min_size=1, max_size=3),
       container=st.sampled_from(["list", "tuple"]))
def test_scale_lists_and_tuples(student: Any, values: list[float], container: str) -> None:
    args = {"world": scenarios.world([[[1]]]),
            "ops": [{"op": "new", "kwargs": {"init_scale": 4096.0}},
                    {"op": "scale", "values": values, "dtype": "float16", "container": container}]}
    expect.check_results(args, scenarios.torch_results(args), student.run("scaler_ops", args),
                         what=f"scale() of a {container} returns a {container} of float32 tensors, each scaled.")


@given(kwargs=scenarios.scaler_kwargs(), overflows=scenarios.overflow_runs)
def test_state_dict_round_trip(student: Any, kwargs: dict[str, Any], overflows: list[bool]) -> None:
    args = scenarios.run_args(kwargs, overflows)
    args["ops"].append({"op": "state_dict"})
    expected = scenarios.torch_results(args)
    saved = expected[-1]["ok"]
    args["ops"] += [{"op": "new", "kwargs": {}}, {"op": "load_state_dict", "state": saved},
                    {"op": "state_dict"}, {"op": "observe"}]
    expected = scenarios.torch_results(args)
    expect.check_results(args, expected, student.run("scaler_ops", args), only=["state_dict", "observe", "load_state_dict"],
                         what="state_dict() returns torch's five keys; load_state_dict() restores all of them, "
                              "tracker included (a state saved by torch.amp.GradScaler loads too).")


# A restored tracker already past growth_interval is left out on purpose: only an inconsistent state
# dict reaches it, and the contract ("when it reaches growth_interval") allows both == and >= there.
RESTORED_STATES = {
    "defaults": None,
    "tracker one short of a long interval": {"growth_interval": 2000, "_growth_tracker": 1999},
}


@pytest.mark.parametrize("case", sorted(RESTORED_STATES))
def test_defaults_and_restored_state(student: Any, case: str) -> None:
    state = RESTORED_STATES[case]
    ops: list[dict[str, Any]] = [{"op": "new", "kwargs": {}}, {"op": "state_dict"}]
    if state is not None:
        ops.append({"op": "load_state_dict",
                    "state": {"scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.5, **state}})
    args = {"world": scenarios.world([[[2]]]), "ops": ops}
    args["ops"] += scenarios.iteration_ops(1, [], [[2]]) + [{"op": "state_dict"}]
    expect.check_results(args, scenarios.torch_results(args), student.run("scaler_ops", args),
                         what=f"{case}: the constructor's defaults are torch's (2**16, 2.0, 0.5, 2000), and the next "
                              "update() continues from a restored tracker exactly as torch.amp.GradScaler does.")


def test_no_forbidden_delegation(student: Any) -> None:
    source = student.source("loss_scaler")
    if source is None:
        expect.fail("loss_scaler.py is missing.")
    problems = forbidden_delegation(source)
    refused = getattr(student, "rule_fault", lambda module: None)("loss_scaler")
    if refused:  # not run at all: the gate cannot tell delegation apart, and Task 1 scores 0 either way
        expect.fail(refused)
    try:
        used = student.run("delegation", {})
    except SubmissionFault:  # a crash or hang is no evidence of delegation; the tests it breaks say so
        used = {"counts": {}, "holds_grad_scaler": False}
    problems += [f"{name} (called {count} times while we ran your scaler)"
                 for name, count in used["counts"].items() if count]
    if used["holds_grad_scaler"]:
        problems.append("a torch.amp.GradScaler inside your ToyLossScaler")
    if problems:
        expect.fail("loss_scaler.py must implement the scaling itself, so Task 1 scores 0. It uses:\n  "
                    + "\n  ".join(problems))
