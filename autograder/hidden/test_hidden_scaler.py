"""Hidden checks for Task 1 (ToyLossScaler).  Never shipped to students."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from autograder.engine import examples
from checks.judge import behaviours, expect, cases, sequences


@st.composite
def _growth_cases(draw: st.DrawFn) -> tuple[dict[str, Any], list[list[int]], int]:
    kwargs, opts = draw(cases.scaler_kwargs()), draw(st.integers(1, 3))
    return kwargs, draw(cases.optimizer_runs(opts)), opts


#: Growth at an interval above 256 (torch's default is 2000): CPython caches the ints up to 256, so a tracker
#: compared with ``is`` grows below it and never above.
_LONG_INTERVAL = ({"init_scale": 1.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 300},
                  [[]] * 301, 1)


@given(case=_growth_cases())
@example(case=_LONG_INTERVAL)
def test_update_rule_properties(student: Any, case: tuple[dict[str, Any], list[list[int]], int]) -> None:
    kwargs, runs, opts = case
    behaviours.growth(student, kwargs, runs, opts)


@given(kwargs=cases.scaler_kwargs(powers_of_two=False), overflows=cases.overflow_runs)
def test_update_rule_non_power_of_two_factors(student: Any, kwargs: dict[str, Any], overflows: list[bool]) -> None:
    behaviours.float32_rounding(student, kwargs, overflows)


@given(exponent=st.integers(120, 127), growth=st.sampled_from([2.0, 4.0, 1e10]))
def test_growth_skipped_when_float32_would_overflow(student: Any, exponent: int, growth: float) -> None:
    behaviours.no_growth_to_inf(student, {"init_scale": 2.0**exponent, "growth_factor": growth,
                                          "growth_interval": 1}, 4)


_NEW_SCALE_KWARGS = {"init_scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2}


@given(kwargs=cases.scaler_kwargs(), clean=st.integers(0, 3), new_scale=cases.any_scales,
       after=st.lists(st.booleans(), max_size=3))
@example(kwargs=_NEW_SCALE_KWARGS, clean=1, new_scale=1e39, after=[])  # beyond float32: RuntimeError, as torch
@example(kwargs=_NEW_SCALE_KWARGS, clean=1, new_scale=-1e39, after=[])
@example(kwargs=_NEW_SCALE_KWARGS, clean=1, new_scale=cases.FLOAT32_MAX, after=[False])  # the largest it holds
@example(kwargs=_NEW_SCALE_KWARGS, clean=1, new_scale=float("inf"), after=[])  # stored as inf
def test_update_new_scale_keeps_tracker(student: Any, kwargs: dict[str, Any], clean: int, new_scale: float,
                                        after: list[bool]) -> None:
    behaviours.new_scale_keeps_tracker(student, kwargs, clean, new_scale, after)


@given(opts=st.integers(1, 3), bad_params=st.integers(1, 4), special=st.sampled_from(cases.SPECIALS))
def test_one_backoff_per_update(student: Any, opts: int, bad_params: int, special: float) -> None:
    behaviours.one_backoff_per_update(student, opts, bad_params, special)


def test_matches_torch_gradscaler(student: Any) -> None:
    count = examples.count_for("test_matches_torch_gradscaler")
    behaviours.scenario_search(student, count)
    behaviours.differential_search(student, sequences.call_sequences(), count)


@given(scale=cases.power_of_two_scales, special=st.sampled_from(cases.SPECIALS + (None,)),
       where=st.integers(0, 6))
def test_unscale_bit_exact(student: Any, scale: float, special: float | None, where: int) -> None:
    grads: list[list[float]] = [[1.0, 2.0, 3.0], [1e-30, -3e38, -3e38, 7.0]]  # finite, but their sum overflows
    if special is not None:
        flat = [(0, j) for j in range(3)] + [(1, j) for j in range(4)]
        i, j = flat[where]
        grads[i][j] = special
    behaviours.overflow_detection(student, scale, grads)


MISUSES = {
    "unscale_ twice": ["unscale_", "unscale_"],
    "unscale_ after step": ["step", "unscale_"],
    "step twice": ["step", "step"],
    "update without step": ["step", "update", "update"],
}


@given(misuse=st.sampled_from(sorted(MISUSES)))
def test_misuse_raises_runtime_error(student: Any, misuse: str) -> None:
    behaviours.misuse(student, MISUSES[misuse])


@given(values=st.lists(st.sampled_from([0.5, 1.0, 3.0, -2.0]), min_size=1, max_size=4))
def test_float16_grads_rejected(student: Any, values: list[float]) -> None:
    behaviours.float16_rejected(student, values)


@given(values=st.lists(st.sampled_from([0.5, 3.0, 1000.0, 60000.0]), min_size=1, max_size=3),
       container=st.sampled_from(["list", "tuple", "nested"]))
def test_scale_lists_and_tuples(student: Any, values: list[float], container: str) -> None:
    behaviours.lists_and_tuples(student, values, container)


@given(kwargs=cases.scaler_kwargs(powers_of_two=False), overflows=cases.overflow_runs)
def test_state_dict_round_trip(student: Any, kwargs: dict[str, Any], overflows: list[bool]) -> None:
    behaviours.state_round_trip(student, kwargs, overflows)
