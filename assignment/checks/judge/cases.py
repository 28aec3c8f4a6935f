"""Building blocks shared by the public checks and the hidden suite.

* hypothesis strategies for scaler constructor arguments and training runs;
* builders that turn a run (clean / overflowing iterations) into scaler ops;
* the trusted references: torch's own ``GradScaler`` and a plain-Python model of
  the update rule, both evaluated in the checking process, never in the student's.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

import torch
from hypothesis import strategies as st

from checks.judge import expect
from checks.runners import harness
from checks.words import say

Json = Any
SPECIALS = (math.inf, -math.inf, math.nan)

# --------------------------------------------------------------------------- references


#: float32's largest finite value: update(new_scale) beyond it (finite) raises RuntimeError, as torch's fill_.
FLOAT32_MAX = float(torch.finfo(torch.float32).max)


def float32(value: float) -> float:
    """``value`` rounded to float32 (inf when out of range), as torch's kernels store it."""
    return torch.tensor(value, dtype=torch.float64).to(torch.float32).item()


_REFERENCE_CACHE: dict[str, str] = {}
_REFERENCE_CACHE_SIZE = 20_000


def torch_results(args: dict[str, Json]) -> list[Json]:
    """What ``torch.amp.GradScaler("cpu")`` does for the same ops (the differential reference).

    Cached by the ops' content for the life of the process: grading is derandomized, so a batch
    worker asks the same scenarios for every submission that reaches them.
    """
    key = json.dumps(args, sort_keys=True)
    if key not in _REFERENCE_CACHE:
        if len(_REFERENCE_CACHE) >= _REFERENCE_CACHE_SIZE:
            _REFERENCE_CACHE.pop(next(iter(_REFERENCE_CACHE)))
        _REFERENCE_CACHE[key] = json.dumps(harness.run_scaler_ops(args, harness.torch_scaler), allow_nan=True)
    return json.loads(_REFERENCE_CACHE[key])  # a fresh copy: callers may change what they get


def model_update(scale: float, tracker: int, found_inf: bool, kwargs: dict[str, Json]) -> tuple[float, int]:
    """The update rule, written out: (scale, tracker) after one ``update()``."""
    if found_inf:
        return float32(scale * kwargs.get("backoff_factor", 0.5)), 0
    if tracker + 1 == kwargs.get("growth_interval", 2000):
        grown = float32(scale * kwargs.get("growth_factor", 2.0))
        return (grown if math.isfinite(grown) else scale), 0
    return scale, tracker + 1


def transitions(args: dict[str, Json], results: Sequence[dict[str, Json]],
                found_inf: Sequence[bool]) -> list[tuple[int, Json, bool, dict[str, Json]]]:
    """(op index, observation before, whether that iteration overflowed, result after) of every update.

    ``found_inf[i]`` says whether the iteration between observations ``i`` and ``i + 1`` overflowed.
    Each update is judged from the student's *own* previous observation, so one wrong update
    costs only the check of the behaviour it got wrong, not every later one.
    """
    seen = observations(args, results)
    return [(seen[i][0], seen[i - 1][1].get("ok"), found_inf[i - 1], seen[i][1]) for i in range(1, len(seen))]


def check_update_rule(args: dict[str, Json], results: Sequence[dict[str, Json]], kwargs: dict[str, Json],
                      found_inf: Sequence[bool], what: str, *, overflowing: bool) -> None:
    """Fail unless every update after an overflowing (``overflowing``) or clean iteration follows
    :func:`model_update`, starting from the (scale, tracker) the scaler itself printed just before."""
    __tracebackhide__ = True
    expect.no_errors(args, results, what)
    for index, before, overflowed, result in transitions(args, results, found_inf):
        if overflowed != overflowing or not isinstance(before, dict):
            continue
        scale, tracker = model_update(float(before["scale"]), int(before["tracker"]), overflowed, kwargs)
        if not expect.close({"scale": scale, "tracker": tracker}, result.get("ok")):
            expect.mismatch(args, index, say("do.print", value=f"{scale!r} {tracker}"), result,
                            what=what + say("before.update_pair", scale=repr(before["scale"]), tracker=before["tracker"]))


# --------------------------------------------------------------------------- op builders


def world(groups_per_optimizer: Sequence[Sequence[Sequence[int]]], lr: float = 0.1) -> dict[str, Json]:
    return {"optimizers": [{"groups": [list(g) for g in groups], "lr": lr} for groups in groups_per_optimizer],
            "seed": 0}


def param_sizes(args_world: dict[str, Json], opt: int) -> list[int]:
    return [size for group in args_world["optimizers"][opt]["groups"] for size in group]


def clean_grads(sizes: Sequence[int], value: float = 1.0) -> list[Json]:
    return [[value * (i + 1)] * size for i, size in enumerate(sizes)]


def overflow_grads(sizes: Sequence[int], special: float = math.inf, where: int = 0) -> list[Json]:
    grads = clean_grads(sizes)
    flat = [(i, j) for i, size in enumerate(sizes) for j in range(size)]
    i, j = flat[where % len(flat)]
    grads[i][j] = special
    return grads


def iteration_ops(opts: int, overflow_in: Sequence[int], sizes: Sequence[Sequence[int]],
                  special: float = math.inf) -> list[dict[str, Json]]:
    """One iteration: set grads (inf in the optimizers listed), step each optimizer, update, observe."""
    ops: list[dict[str, Json]] = []
    for opt in range(opts):
        grads = overflow_grads(sizes[opt], special) if opt in overflow_in else clean_grads(sizes[opt])
        ops.append({"op": "grads", "opt": opt, "values": grads})
    ops += [{"op": "step", "opt": opt} for opt in range(opts)]
    return ops + [{"op": "update"}, {"op": "observe"}]


def run_args(kwargs: dict[str, Json], overflows: Sequence[bool], opts: int = 1) -> dict[str, Json]:
    """A single-parameter-per-optimizer run: each bool says whether that iteration overflows."""
    w = world([[[2]]] * opts)
    sizes = [param_sizes(w, opt) for opt in range(opts)]
    ops: list[dict[str, Json]] = [{"op": "new", "kwargs": kwargs}, {"op": "observe"}]
    for overflow in overflows:
        ops += iteration_ops(opts, [0] if overflow else [], sizes)
    return {"world": w, "ops": ops}


def runs_args(kwargs: dict[str, Json], runs: Sequence[Sequence[int]], opts: int) -> tuple[dict[str, Json], list[bool]]:
    """A run over ``opts`` one-parameter optimizers: ``runs[i]`` lists the optimizers whose gradients overflow
    in iteration ``i``.  Returns the args and, per iteration, whether it overflowed."""
    w = world([[[2]]] * opts)
    sizes = [param_sizes(w, opt) for opt in range(opts)]
    ops: list[dict[str, Json]] = [{"op": "new", "kwargs": kwargs}, {"op": "observe"}]
    for overflow_in in runs:
        ops += iteration_ops(opts, overflow_in, sizes)
    return {"world": w, "ops": ops}, [bool(overflow_in) for overflow_in in runs]


def observations(args: dict[str, Json], results: Sequence[dict[str, Json]]) -> list[tuple[int, Json]]:
    """(op index, result) of every ``observe`` op."""
    return [(i, r) for i, (op, r) in enumerate(zip(args["ops"], results)) if op["op"] == "observe"]


# --------------------------------------------------------------------------- strategies

power_of_two_scales = st.integers(-8, 24).map(lambda k: 2.0**k)
any_scales = st.one_of(power_of_two_scales, st.floats(1e-3, 1e6))  # not float32: the scaler must round


# Built once, not at every draw: the examples are the same either way, the draws are cheaper.
_POWER_OF_TWO_GROWTH = st.sampled_from([2.0, 4.0, 8.0])
_POWER_OF_TWO_BACKOFF = st.sampled_from([0.5, 0.25, 0.125])
_ANY_GROWTH = st.one_of(st.sampled_from([1.5, 3.0, 1.001]), st.floats(1.01, 10.0))
_ANY_BACKOFF = st.one_of(st.sampled_from([0.3, 0.9, 0.999]), st.floats(0.01, 0.99))
_GROWTH_INTERVALS = st.integers(1, 4)


@st.composite
def scaler_kwargs(draw: st.DrawFn, powers_of_two: bool = True) -> dict[str, Json]:
    """Valid constructor arguments with small growth intervals (so growth happens)."""
    if powers_of_two:
        growth = draw(_POWER_OF_TWO_GROWTH)
        backoff = draw(_POWER_OF_TWO_BACKOFF)
        init = draw(power_of_two_scales)
    else:
        growth = draw(_ANY_GROWTH)
        backoff = draw(_ANY_BACKOFF)
        init = draw(any_scales)
    return {"init_scale": init, "growth_factor": growth, "backoff_factor": backoff,
            "growth_interval": draw(_GROWTH_INTERVALS)}


overflow_runs = st.lists(st.booleans(), min_size=1, max_size=12)


@st.composite
def optimizer_runs(draw: st.DrawFn, opts: int, max_overflowing: int | None = None) -> list[list[int]]:
    """Iterations over ``opts`` optimizers, each listing the optimizers that overflow (at most ``max_overflowing``)."""
    most = opts if max_overflowing is None else max_overflowing
    return draw(st.lists(st.lists(st.integers(0, opts - 1), max_size=most, unique=True), min_size=1, max_size=10))

#: Constructor arguments the contract rejects with ValueError (each one is checked).
BAD_CONSTRUCTOR_KWARGS: tuple[dict[str, Json], ...] = (
    *({"init_scale": v} for v in (0.0, -0.5, -1.0, -(2.0**16), math.inf, math.nan)),
    *({"init_scale": v} for v in (1e-50, 3.5e38, 3.4028235e38)),  # float32: rounds to 0; above its max (torch: later)
    *({"growth_factor": v} for v in (1.0, 0.5, 0.0, -2.0)),
    *({"backoff_factor": v} for v in (0.0, 1.0, 1.5, -0.5)),
    *({"growth_interval": v} for v in (0, -1, -2000, 2.5, True)),
)

#: Valid at the edge of float32 (its largest value; a subnormal that does not round to 0): accepted, as torch does.
EDGE_CONSTRUCTOR_KWARGS: tuple[dict[str, Json], ...] = ({"init_scale": FLOAT32_MAX}, {"init_scale": 1e-45})


@st.composite
def grad_values(draw: st.DrawFn, size: int, allow_special: bool) -> Json:
    """One parameter's gradient: None, or ``size`` values, maybe with inf/NaN at random positions."""
    if draw(st.integers(0, 5)) == 0:
        return None
    values = draw(st.lists(st.floats(-1e3, 1e3, width=32), min_size=size, max_size=size))
    if allow_special and draw(st.integers(0, 3)) == 0:
        position = draw(st.integers(0, size - 1))
        values[position] = draw(st.sampled_from(SPECIALS))
    return values


@st.composite
def generated_scenarios(draw: st.DrawFn, powers_of_two: bool = True) -> dict[str, Json]:
    """Several optimizers and param groups, None grads, specials, explicit unscale_ and clipping."""
    groups = draw(st.lists(st.lists(st.lists(st.integers(1, 3), min_size=1, max_size=2), min_size=1, max_size=2),
                           min_size=1, max_size=3))
    w = world(groups)
    ops: list[dict[str, Json]] = [{"op": "new", "kwargs": draw(scaler_kwargs(powers_of_two))}]
    for _ in range(draw(st.integers(1, 6))):
        ops.append({"op": "scale", "values": [draw(st.floats(0.0, 4.0, width=16))], "dtype": "float16"})
        for opt in range(len(groups)):
            sizes = param_sizes(w, opt)
            values = [draw(grad_values(size, allow_special=True)) for size in sizes]
            if all(v is None for v in values):  # torch asserts when an optimizer has no gradient at all
                values[0] = [1.0] * sizes[0]
            ops.append({"op": "grads", "opt": opt, "values": values})
            mode = draw(st.sampled_from(["step", "unscale", "clip"]))
            if mode in ("unscale", "clip"):
                ops.append({"op": "unscale_", "opt": opt})
            if mode == "clip":
                ops.append({"op": "clip", "opt": opt, "max_norm": draw(st.sampled_from([0.5, 10.0]))})
            ops.append({"op": "step", "opt": opt})
            ops.append({"op": "params", "opt": opt})
        ops += [{"op": "update"}, {"op": "observe"}]
    return {"world": w, "ops": ops}
