"""The stateful differential search: sequences of public calls, run on the student's scaler and on torch's.

:func:`call_sequences` draws a whole sequence of calls (a ``scaler_ops`` scenario: the constructor with any valid
arguments, ``scale`` of tensors and containers in each float dtype, gradients with and without inf/NaN in several
optimizers and parameter groups, ``unscale_``, ``step``, ``update`` with and without ``new_scale``,
``load_state_dict`` of any state torch accepts, a tracker at or above the interval included), with every
observable read after every call that changes one (``observe`` and ``state_dict`` after the constructor, an update
or a load; the parameters after a step).  It keeps to the calls the contract and torch agree on: an optimizer is
unscaled or stepped only once it has a gradient, ``update()`` only after an ``unscale_``/``step`` (torch asserts
otherwise); a misuse the contract names (a second ``unscale_`` or ``step``) is drawn on purpose.

:func:`first_difference` compares the two runs call by call, bit for bit: an error's type (the student's may be a
subclass) and whether one was raised, every value exactly.

Which row a deviation costs is :mod:`checks.judge.deviations`' (one deviation, one row).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from hypothesis import strategies as st

from checks.judge import expect
from checks.judge.cases import SPECIALS, world

Json = Any
# --------------------------------------------------------------------------- the sequences

#: Choices in the order hypothesis shrinks towards (the first is the simplest): a power of two first, so that a
#: mistake seen at every scale is shown at one, and one seen only elsewhere keeps the scale it needs.
#: No scale a few backoffs take to 0 (a subnormal one): torch then multiplies by an infinite reciprocal, outside
#: the contract.
_INIT_SCALES = (2.0, 1.0, 3.0, 65536.0, 0.1, 2.0**-24, 2.0**127, 3.4e38, 7)  # a bool is not graded
_GROWTH = (2.0, 4.0, 1.5, 3.0, 1.0001, 1e10)
_BACKOFF = (0.5, 0.25, 0.3, 0.9, 0.999, 1e-3)
_INTERVALS = (1, 2, 3, 5, 2000)
_NEW_SCALES = (0.5, 3.0, 1024.0, 1e-3, 3.4e38, 1e39)
_STATE_SCALES = (2.0, 3.0, 0.1, 2.0**127, 3.5e38)
_VALUES = (1.0, -2.0, 0.5, 3.0, 1e-30, 3e38, -3e38, 1000.0)
_DTYPES = ("float16", "float32", "bfloat16", "float64")
_CONTAINERS = ("tensor", "list", "tuple", "nested")  # nested: a list holding a tensor and a tuple of the rest
#: The calls a sequence draws, simplest first.
_CALLS = ("grads", "iteration", "step", "update", "unscale_", "scale", "new_scale", "load_state_dict", "clip")
#: What is read after a call that changes the scaler's state.
_READ = ({"op": "observe"}, {"op": "state_dict"})

#: Public inputs (the public checks) and the hidden ones: the same kinds of calls, fewer and from fixed lists there.
#: Every strategy is built once, here: a draw is a lookup, which is what keeps shrinking a sequence quick.
_WORLD = {public: st.lists(st.lists(st.lists(st.integers(1, 3), min_size=1, max_size=2), min_size=1, max_size=2),
                           min_size=1, max_size=2 if public else 3) for public in (True, False)}
_COUNT = {True: st.integers(1, 6), False: st.integers(1, 12)}
_KWARGS = {public: (("init_scale", st.sampled_from(_INIT_SCALES) if public
                     else st.one_of(st.sampled_from(_INIT_SCALES), st.floats(1e-3, 1e6))),
                    ("growth_factor", st.sampled_from(_GROWTH) if public
                     else st.one_of(st.sampled_from(_GROWTH), st.floats(1.01, 10.0))),
                    ("backoff_factor", st.sampled_from(_BACKOFF) if public
                     else st.one_of(st.sampled_from(_BACKOFF), st.floats(0.01, 0.99))),
                    ("growth_interval", st.sampled_from(_INTERVALS)))
           for public in (True, False)}
_GRAD_VALUE = {True: st.sampled_from(_VALUES), False: st.one_of(st.sampled_from(_VALUES), st.floats(-1e3, 1e3, width=32))}
_BOOL, _CALL, _SPECIAL = st.booleans(), st.sampled_from(_CALLS), st.sampled_from(SPECIALS)
_INTS = {high: st.integers(0, high) for high in range(6)}
_SCALED = st.one_of(st.sampled_from(_VALUES), st.lists(st.sampled_from(_VALUES), min_size=1, max_size=2))
_SCALE_COUNT, _DTYPE, _CONTAINER = st.integers(1, 3), st.sampled_from(_DTYPES), st.sampled_from(_CONTAINERS)
_STATE = st.fixed_dictionaries({"scale": st.sampled_from(_STATE_SCALES), "growth_factor": st.sampled_from(_GROWTH),
                                "backoff_factor": st.sampled_from(_BACKOFF),
                                "growth_interval": st.sampled_from((3, 2, 1))})  # simplest: a tracker below it
_NEW_SCALE = st.sampled_from(_NEW_SCALES)


def _grad(draw: st.DrawFn, size: int, public: bool, first: bool) -> Json:
    """One parameter's gradient: None (never the optimizer's first: torch asserts when none has one), or values."""
    if not first and draw(_INTS[4]) == 4:  # the last choice, so that the simplest gradient is one
        return None
    values = [draw(_GRAD_VALUE[public]) for _ in range(size)]
    if draw(_INTS[3]) == 3:  # likewise: finite is simpler than inf/NaN
        values[draw(_INTS[size - 1])] = draw(_SPECIAL)
    return values


@st.composite
def call_sequences(draw: st.DrawFn, public: bool = False) -> dict[str, Json]:
    """One scenario: a world of optimizers and a sequence of calls on one scaler (see the module's docstring)."""
    groups = draw(_WORLD[public])
    scenario_world = world(groups)
    sizes = [[size for group in opt for size in group] for opt in groups]
    kwargs = {name: draw(strategy) for name, strategy in _KWARGS[public] if draw(_BOOL)}
    ops: list[dict[str, Json]] = [{"op": "new", "kwargs": kwargs}, *_READ]
    stage = [""] * len(groups)  # "" (no gradient yet), "ready", "unscaled" or "stepped", per optimizer
    for _ in range(draw(_COUNT[public])):
        call = draw(_CALL)
        opt = draw(_INTS[len(groups) - 1])
        if call == "iteration":  # a training iteration: gradients, a step, an update
            values = [_grad(draw, size, public, i == 0) for i, size in enumerate(sizes[opt])]
            ops += [{"op": "grads", "opt": opt, "values": values}, {"op": "step", "opt": opt},
                    {"op": "params", "opt": opt}, {"op": "update"}, {"op": "observe"}]
            stage = ["ready" if s or o == opt else "" for o, s in enumerate(stage)]
        elif call == "grads" or (call in ("step", "unscale_", "clip") and not stage[opt]):
            values = [_grad(draw, size, public, i == 0) for i, size in enumerate(sizes[opt])]
            ops.append({"op": "grads", "opt": opt, "values": values})
            stage[opt] = stage[opt] or "ready"
        elif call == "step":
            ops += [{"op": "step", "opt": opt}, {"op": "params", "opt": opt}]
            stage[opt] = "stepped"
        elif call == "unscale_":
            ops.append({"op": "unscale_", "opt": opt})
            stage[opt] = "unscaled" if stage[opt] == "ready" else stage[opt]
        elif call == "clip":
            ops.append({"op": "clip", "opt": opt, "max_norm": 0.5})
        elif call == "scale":
            container = draw(_CONTAINER)
            count = 1 if container == "tensor" else max(draw(_SCALE_COUNT), 2 if container == "nested" else 1)
            values = [draw(_SCALED) for _ in range(count)]
            ops.append({"op": "scale", "values": values, "dtype": draw(_DTYPE), "container": container})
        elif call == "load_state_dict":
            state = draw(_STATE)
            state["_growth_tracker"] = draw(_INTS[state["growth_interval"] + 2])
            ops += [{"op": "load_state_dict", "state": state}, *_READ]
        elif call == "new_scale" or any(s in ("unscaled", "stepped") for s in stage):
            update: dict[str, Json] = {"op": "update"}
            if call == "new_scale":
                update["new_scale"] = draw(_NEW_SCALE)
                if draw(_BOOL):
                    update["tensor"] = True
            ops += [update, {"op": "observe"}]
            stage = ["ready" if s else "" for s in stage]
    return {"world": scenario_world, "ops": ops}


# --------------------------------------------------------------------------- comparing two runs


def differs(op: dict[str, Json], want: dict[str, Json], have: dict[str, Json]) -> bool:
    """Whether the student's result ``have`` of ``op`` differs from torch's ``want``: an error's type (a subclass
    counts), whether one was raised, every value bit for bit."""
    if "error" in want:
        return not expect.raised(have, want["error"]["type"])
    return "ok" not in have or not expect.close(want["ok"], have["ok"])


def first_difference(args: dict[str, Json], expected: Sequence[dict[str, Json]],
                     got: Sequence[dict[str, Json]]) -> int | None:
    """The index of the first call whose results differ, or None."""
    for index, (op, want, have) in enumerate(zip(args["ops"], expected, got)):
        if differs(op, want, have):
            return index
    return None


# --------------------------------------------------------------------------- shrinking a sequence that differs

_READS = ("observe", "state_dict", "params")


def _calls(ops: list[dict[str, Json]]) -> list[list[dict[str, Json]]]:
    """The ops as calls: each op with the reads the sequence made right after it."""
    calls: list[list[dict[str, Json]]] = []
    for op in ops:
        if op["op"] in _READS and calls:
            calls[-1].append(op)
        else:
            calls.append([op])
    return calls


def valid(ops: list[dict[str, Json]]) -> bool:
    """Whether a sequence keeps to the calls :func:`call_sequences` draws (see the module's docstring)."""
    stage: dict[int, str] = {}
    for op in ops:
        kind, opt = op["op"], op.get("opt")
        if kind == "grads":
            stage[opt] = stage.get(opt) or "ready"
        elif kind in ("step", "unscale_", "clip"):
            if opt not in stage:
                return False
            if kind == "step":
                stage[opt] = "stepped"
            elif kind == "unscale_" and stage[opt] == "ready":
                stage[opt] = "unscaled"
        elif kind == "update":
            if op.get("new_scale") is None and not any(s != "ready" for s in stage.values()):
                return False
            stage = {o: "ready" for o in stage}
    return True


def _simpler(args: dict[str, Json]) -> list[dict[str, Json]]:
    """Candidate simplifications of a sequence, simplest change first: calls left out (the last first), the
    constructor's arguments left out or a power-of-two scale, a float new_scale for a tensor, a restored tracker of
    0, gradients without inf/NaN or all 1.0."""
    calls = _calls(args["ops"])
    candidates = []
    for index in range(len(calls) - 2, 0, -1):  # never the constructor, never the last call (the one that differs)
        candidates.append([op for i, call in enumerate(calls) if i != index for op in call])
    new = args["ops"][0]
    for name in new.get("kwargs", {}):
        kwargs = {key: value for key, value in new["kwargs"].items() if key != name}
        candidates.append([{**new, "kwargs": kwargs}, *args["ops"][1:]])
    if new.get("kwargs", {}).get("init_scale", 2.0) != 2.0:
        candidates.append([{**new, "kwargs": {**new["kwargs"], "init_scale": 2.0}}, *args["ops"][1:]])
    for index, op in enumerate(args["ops"]):
        simpler: list[dict[str, Json]] = []
        if op["op"] == "update" and op.get("tensor"):
            simpler.append({key: value for key, value in op.items() if key != "tensor"})
        if op["op"] == "load_state_dict" and op["state"]["_growth_tracker"]:
            simpler.append({**op, "state": {**op["state"], "_growth_tracker": 0}})
        candidates += [[*args["ops"][:index], changed, *args["ops"][index + 1:]] for changed in simpler]
        if op["op"] == "grads":
            plain = [None if g is None else [1.0 if not math.isfinite(v) else v for v in g] for g in op["values"]]
            ones = [None if g is None else [1.0] * len(g) for g in op["values"]]
            for values in (plain, ones):
                if values != op["values"]:
                    candidates.append([*args["ops"][:index], {**op, "values": values}, *args["ops"][index + 1:]])
    return [{**args, "ops": ops} for ops in candidates if valid(ops)]


def shrink(args: dict[str, Json], differs: Any, budget: int) -> dict[str, Json]:
    """A simpler sequence that still ``differs`` (a judge's call per try, at most ``budget`` tries): cut after the
    first differing call, then each simplification of :func:`_simpler` kept while it still differs."""
    cut = differs(args)
    if isinstance(cut, int):
        args = {**args, "ops": args["ops"][:cut + 1]}
        args = {**args, "ops": [op for call in _calls(args["ops"]) for op in call]}
    improved = True
    while improved and budget > 0:
        improved = False
        for candidate in _simpler(args):
            budget -= 1
            found = differs(candidate)
            if found is not None:
                args = {**candidate, "ops": candidate["ops"][:found + 1]}
                improved = True
                break
            if budget <= 0:
                break
    return args
