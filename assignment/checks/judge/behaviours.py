"""One check per graded behaviour of ``ToyLossScaler``, shared by the public and the hidden suite.

A rubric row is one behaviour.  Its public test (in ``checks/test_public_scaler.py``)
and its hidden test (same function name, in the grader's hidden suite) call the same
check here with different inputs, so the public checks show every concept once and
the hidden tests only vary inputs and sizes.

Each check looks only at the observations of its own behaviour (one cause, one
deduction): update-rule checks judge each update from the scaler's own previous
(scale, tracker); the state check compares what was saved with what was restored;
metamorphic checks (one backoff per update, lists and tuples) compare the scaler with
itself; only :func:`matches_torch` (the differential row) compares everything with
``torch.amp.GradScaler``.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any, Sequence

from hypothesis import Phase, find, settings
from hypothesis.errors import NoSuchExample
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from checks.judge import deviations, expect, cases, sequences
from checks.runners.harness import SubmissionFault
from checks.words import say

Json = Any


def _run(student: Any, args: dict[str, Json]) -> list[Json]:
    return student.run("scaler_ops", args)


# --------------------------------------------------------------------------- update rule


def backoff(student: Any, kwargs: dict[str, Json], runs: Sequence[Sequence[int]], opts: int) -> None:
    """After an iteration in which an optimizer overflowed: scale * backoff_factor (float32), tracker 0."""
    args, found_inf = cases.runs_args(kwargs, runs, opts)
    cases.check_update_rule(args, _run(student, args), kwargs, found_inf, overflowing=True,
                                what=say("what.backoff"))


def growth(student: Any, kwargs: dict[str, Json], runs: Sequence[Sequence[int]], opts: int) -> None:
    """After a clean iteration: tracker + 1, or growth (and tracker 0) when that reaches growth_interval."""
    args, found_inf = cases.runs_args(kwargs, runs, opts)
    cases.check_update_rule(args, _run(student, args), kwargs, found_inf, overflowing=False,
                                what=say("what.growth"))


def _float32_product(before: float, after: float, factors: Sequence[float]) -> float | None:
    """The float32-rounded product ``before * f`` that ``after`` approximates (to 1e-7, more than float32's
    rounding error of 6e-8 but less than any other rule's), if any."""
    for factor in factors:
        exact = before * factor
        if math.isfinite(exact) and math.isclose(after, exact, rel_tol=1e-7):
            return cases.float32(exact)
    return None


def float32_rounding(student: Any, kwargs: dict[str, Json], overflows: Sequence[bool]) -> None:
    """Every scale held is a float32 value: init_scale rounded, each new scale the rounded float64 product."""
    args, found_inf = cases.runs_args(kwargs, [[0] if o else [] for o in overflows], 1)
    results = _run(student, args)
    what = say("what.float32")
    expect.no_errors(args, results, what)
    first_index, first = cases.observations(args, results)[0]
    init = float(kwargs["init_scale"])
    if math.isclose(first["ok"]["scale"], init, rel_tol=1e-6) and first["ok"]["scale"] != cases.float32(init):
        expect.mismatch(args, first_index, say("do.print", value=f"{cases.float32(init)!r} 0"), first, what=what)
    factors = (kwargs.get("growth_factor", 2.0), kwargs.get("backoff_factor", 0.5))
    for index, before, _, result in cases.transitions(args, results, found_inf):
        old, new = float(before["scale"]), float(result["ok"]["scale"])
        if new == old:
            continue
        rounded = _float32_product(old, new, factors)
        if rounded is not None and new != rounded:
            expect.mismatch(args, index, say("do.print", value=f"{rounded!r} {result['ok']['tracker']}"), result,
                            what=what + say("before.update_scale", scale=repr(old)))


def no_growth_to_inf(student: Any, kwargs: dict[str, Json], iterations: int) -> None:
    """A growth whose float32 result would be inf is skipped: the scale stays as it was."""
    args, found_inf = cases.runs_args(kwargs, [[]] * iterations, 1)
    results = _run(student, args)
    what = say("what.no_growth_to_inf")
    expect.no_errors(args, results, what)
    growth_factor = kwargs.get("growth_factor", 2.0)
    for index, before, _, result in cases.transitions(args, results, found_inf):
        old = float(before["scale"])
        if not math.isfinite(cases.float32(old * growth_factor)) and result["ok"]["scale"] != old:
            expect.mismatch(args, index, say("do.print", value=f"{old!r} {result['ok']['tracker']}"), result,
                            what=what + say("before.update_scale", scale=repr(old)))


def new_scale_keeps_tracker(student: Any, kwargs: dict[str, Json], clean: int, new_scale: float,
                            after: Sequence[bool]) -> None:
    """update(new_scale): scale = float32(new_scale), tracker unchanged; the next iteration starts fresh.  A finite
    new_scale beyond float32's range raises RuntimeError (torch's fill_ refuses it); inf is stored as inf."""
    args = cases.run_args({**kwargs, "growth_interval": 1000}, [False] * clean)
    sizes = [cases.param_sizes(args["world"], 0)]
    args["ops"] += [{"op": "observe"}] + cases.iteration_ops(1, [], sizes)[:-2]
    args["ops"] += [{"op": "update", "new_scale": new_scale}]
    if math.isfinite(new_scale) and abs(new_scale) > cases.FLOAT32_MAX:
        results = _run(student, args)
        what = say("what.new_scale_beyond")
        expect.no_errors(args, results[:-1], what)
        if not expect.raised(results[-1], "RuntimeError"):
            expect.mismatch(args, len(results) - 1, say("do.raise", error="RuntimeError"), results[-1], what=what)
        return
    args["ops"] += [{"op": "observe"}]
    for overflow in after:  # the next iterations must run: update(new_scale) clears the per-optimizer state
        args["ops"] += cases.iteration_ops(1, [0] if overflow else [], sizes)
    results = _run(student, args)
    what = say("what.new_scale")
    expect.no_errors(args, results, what)
    seen = cases.observations(args, results)
    position = next(i for i, (index, _) in enumerate(seen) if args["ops"][index - 1].get("new_scale") is not None)
    before, (index, result) = seen[position - 1][1]["ok"], seen[position]
    want = {"scale": cases.float32(new_scale), "tracker": before["tracker"]}
    if not expect.close(want, result["ok"]):
        expect.mismatch(args, index, say("do.print", value=f"{want['scale']!r} {want['tracker']}"), result,
                        what=what + say("before.new_scale", scale=repr(before["scale"]), tracker=before["tracker"]))


def one_backoff_per_update(student: Any, opts: int, bad_params: int, special: float) -> None:
    """However many gradients and optimizers overflow, one update() acts as for a single overflow."""
    def scenario(optimizers: int, bad: int) -> dict[str, Json]:
        # every gradient overflows, so that where a scaler looks for inf/NaN does not matter here
        w = cases.world([[[1] * bad]] * optimizers)
        grads = [[special]] * bad
        ops: list[dict[str, Json]] = [{"op": "new", "kwargs": {"init_scale": 1024.0}}]
        ops += [{"op": "grads", "opt": opt, "values": grads} for opt in range(optimizers)]
        ops += [{"op": "step", "opt": opt} for opt in range(optimizers)] + [{"op": "update"}, {"op": "observe"}]
        return {"world": w, "ops": ops}

    single, many = scenario(1, 1), scenario(opts, bad_params)
    what = say("what.one_backoff", bad=bad_params, opts=opts)
    single_results, many_results = _run(student, single), _run(student, many)
    expect.no_errors(single, single_results, what)
    expect.no_errors(many, many_results, what)
    want = single_results[-1]["ok"]
    if not expect.close(want, many_results[-1]["ok"]):
        expect.mismatch(many, len(many["ops"]) - 1, say("do.print_as_single", value=f"{want['scale']!r} {want['tracker']}",
                                                         snippet=expect.snippet(single)), many_results[-1], what=what)


# --------------------------------------------------------------------------- the other behaviours


def matches_torch(student: Any, scenario: dict[str, Json], powers_of_two: bool) -> None:
    """The differential check: the same observations as torch.amp.GradScaler('cpu'), step() results included."""
    expected, got = cases.torch_results(scenario), _run(student, scenario)
    what = say("what.matches_torch")
    expect.check_results(scenario, expected, got, rel=0.0 if powers_of_two else 1e-6, only=["observe", "step"], what=what)
    expect.check_results(scenario, expected, got, rel=1e-6, what=what)


#: How many simpler sequences :func:`checks.judge.sequences.shrink` may try after the search found one that differs
#: (each a round trip to the student's process): a bound on grading time.
SHRINK_CALLS = 60


#: What ``find`` drew, in order, in a search that found nothing, by (the search's name, examples): its generation is
#: derandomized and never depends on the answers until one is found, so every later search of that name in this
#: process draws the same, and one that finds nothing need not ask hypothesis to draw them again.
_DRAWN: dict[tuple[str, int], list[Any]] = {}


def _shrunk(strategy: SearchStrategy, fails: Any, examples: int, shrink: bool = True, name: str = "") -> Any:
    """The first of ``examples`` draws of ``strategy`` for which ``fails`` is true, shrunk by hypothesis unless
    ``shrink`` is false (its ``find``, derandomized as every check), or None.  A search with a ``name`` (one strategy,
    always) first tries what an earlier search of that name drew; only when one of those fails (or raises) does
    ``find`` search, and shrink, as it always would: its first tries of those draws get the answers already given
    (the student's process is asked exactly what it was asked without them)."""
    key = (name, examples)
    drawn = _DRAWN.get(key) if name else None
    answered: dict[str, list[bool]] = {}
    if drawn is not None:
        try:
            for case in drawn:
                failed = fails(copy.deepcopy(case))
                answered.setdefault(json.dumps(case), []).append(failed)
                if failed:
                    break
            else:
                return None
        except Exception:  # noqa: BLE001 - find meets it again, and shrinks towards it
            pass
    seen: list[Any] = []

    def tried(case: Any) -> bool:
        if drawn is None:
            seen.append(copy.deepcopy(case))
        earlier = answered.get(json.dumps(case)) if answered else None
        return earlier.pop(0) if earlier else fails(case)

    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]
    try:
        return find(strategy, tried, settings=settings(max_examples=examples, phases=phases))
    except NoSuchExample:
        if name and drawn is None:
            _DRAWN[key] = seen
        return None


def scenario_search(student: Any, examples: int) -> None:
    """:func:`matches_torch` on ``examples`` training runs of several optimizers and param groups (the scale and
    factors powers of two or not); the simplest run that fails it is shown."""
    drawn = st.booleans().flatmap(lambda powers_of_two: st.tuples(st.just(powers_of_two),
                                                                   cases.generated_scenarios(powers_of_two)))

    def fails(case: tuple[bool, dict[str, Json]]) -> bool:
        try:
            matches_torch(student, case[1], case[0])
        except AssertionError:
            return True
        return False

    found = _shrunk(drawn, fails, examples, name="scenario_search")
    if found is not None:
        matches_torch(student, found[1], found[0])


def differential_search(student: Any, strategy: SearchStrategy, examples: int, shrink: bool = True) -> None:
    """The stateful differential search: ``examples`` sequences of calls (:mod:`checks.judge.sequences`), each
    run on the student's scaler and on torch.amp.GradScaler('cpu') and compared call by call, bit for bit.

    The first sequence that differs (derandomized: the same sequences on every run) is shrunk to a simpler one
    (:func:`checks.judge.sequences.shrink`; not with ``shrink=False``: a fixed sequence keeps the charge it was
    written for), which is charged to the row whose behaviour its first differing call
    exercises (:data:`checks.judge.deviations.ROWS`).  This row fails only for its own kinds: one deviation, one row.
    """
    runs: dict[str, tuple[int | None, list[Json]]] = {}  # by sequence: its first difference and the answers

    def first(args: dict[str, Json]) -> int | None:
        key = json.dumps(args, sort_keys=True)
        if key not in runs:
            expected, got = cases.torch_results(args), _run(student, args)
            if len(got) != len(args["ops"]):
                expect.fail(say("results.malformed", got=len(got), calls=len(args["ops"])))
            runs[key] = sequences.first_difference(args, expected, got), got
        return runs[key][0]

    found = _shrunk(strategy, lambda args: first(args) is not None, examples, shrink=False, name=repr(strategy))
    if found is None:
        return
    args = sequences.shrink(found, first, SHRINK_CALLS) if shrink else found
    index = first(args)
    expected, got = cases.torch_results(args), runs[json.dumps(args, sort_keys=True)][1]
    if index is None or deviations.charged(args, expected, got, index) != deviations.DIFFERENTIAL:
        return  # another row's behaviour: that row's own test charges it
    op, want = args["ops"][index], expected[index]
    wanted = say("do.raise", error=want["error"]["type"]) if "error" in want else expect.shown(op, want, should=True)
    expect.mismatch(args, index, wanted, got[index], what=say("what.stateful"))


def skipped_step(student: Any, sizes: Sequence[int], special: float, path: str) -> None:
    """step() skips optimizer.step() (returns None, parameters untouched) when the gradients hold inf, whoever
    found it: step()'s own unscaling (``path`` "step"), or an explicit unscale_() before it ("unscale_"), maybe
    followed by clipping ("clip", amp_step's clipping path); otherwise it returns what optimizer.step() returned.

    Every gradient holds the infinity, so that where and how a scaler looks for it does not matter here
    (that is row 1.12's); NaN is row 1.12's too (a scaler that looks for inf only loses that row, not this one).
    The scale is 1, so that how (and how often) a scaler unscales does not matter either (row 1.3's): a scaler
    that unscales twice still moves the parameters visibly.
    """
    w = cases.world([[list(sizes)]])
    overflowing = [[special] + grad[1:] for grad in cases.clean_grads(sizes)]
    if path not in ("step", "unscale_", "clip"):
        raise ValueError(f"unknown path {path!r}")
    explicit: list[dict[str, Json]] = [{"op": "unscale_", "opt": 0}] if path != "step" else []
    if path == "clip":
        explicit.append({"op": "clip", "opt": 0, "max_norm": 0.5})
    ops: list[dict[str, Json]] = []
    for grads in (overflowing, cases.clean_grads(sizes)):
        ops += [{"op": "new", "kwargs": {"init_scale": 1.0}}, {"op": "grads", "opt": 0, "values": grads}, *explicit,
                {"op": "step", "opt": 0}]
    args = {"world": w, "ops": ops}
    found_by = say({"step": "found_by.step", "unscale_": "found_by.unscale", "clip": "found_by.clip"}[path])
    expect.check_results(args, cases.torch_results(args), _run(student, args), only=["step"],
                         what=say("what.skipped_step", found_by=found_by))


def overflow_detection(student: Any, scale: float, grads: list[Json]) -> None:
    """inf, -inf and NaN anywhere are found, in the gradients as they are before unscaling; finite values are not.

    Observed through update(): with the default growth_interval a clean iteration leaves the scale
    alone and an overflowing one changes it, whatever step() and the backoff arithmetic do.
    """
    args = {"world": cases.world([[[len(g) for g in grads]]]),
            "ops": [{"op": "new", "kwargs": {"init_scale": scale}}, {"op": "grads", "opt": 0, "values": grads},
                    {"op": "step", "opt": 0}, {"op": "update"}, {"op": "observe"}]}
    expected, got = cases.torch_results(args), _run(student, args)
    what = say("what.overflow_detection")
    expect.no_errors(args, got, what)
    found = expected[-1]["ok"]["scale"] != cases.float32(scale)
    if (got[-1]["ok"]["scale"] != cases.float32(scale)) != found:
        want = expected[-1]["ok"]
        expect.mismatch(args, len(args["ops"]) - 1, say("do.print_found" if found else "do.print_not_found",
                                                         value=f"{want['scale']!r} {want['tracker']}"), got[-1], what=what)


def misuse(student: Any, calls: Sequence[str]) -> None:
    """The second of two calls that the contract forbids raises RuntimeError; the first runs."""
    ops: list[dict[str, Json]] = [{"op": "new", "kwargs": {}}, {"op": "grads", "opt": 0, "values": [[1.0, 2.0]]}]
    ops += [{"op": kind, "opt": 0} if kind != "update" else {"op": "update"} for kind in calls]
    args = {"world": cases.world([[[2]]]), "ops": ops}
    results = _run(student, args)
    what = say("what.misuse", calls=say("what.misuse_then").join(calls))
    expect.no_errors(args, results[:-1], what)
    if not expect.raised(results[-1], "RuntimeError"):
        expect.mismatch(args, len(ops) - 1, say("do.raise", error="RuntimeError"), results[-1], what=what,
                        step_return=False)


def float16_rejected(student: Any, values: list[float]) -> None:
    """unscale_() raises ValueError for float16 gradients and changes nothing: a second try raises it again."""
    w = cases.world([[[len(values)]]])
    w["optimizers"][0]["dtype"] = "float16"  # as after model.half()
    grads = {"op": "grads", "opt": 0, "values": [values], "dtype": "float16"}
    args = {"world": w, "ops": [{"op": "new", "kwargs": {}}, grads, {"op": "unscale_", "opt": 0},
                                {"op": "grads_of", "opt": 0}, {"op": "unscale_", "opt": 0}]}
    expect.check_results(args, cases.torch_results(args), _run(student, args),
                         what=say("what.float16"))


def lists_and_tuples(student: Any, values: list[float], container: str) -> None:
    """scale() of a list/tuple returns the same container type holding scale() of each item; of ``"nested"`` (a
    list holding a tensor and a tuple of the rest), the same nesting."""
    items = [{"op": "scale", "values": [v], "dtype": "float16"} for v in values]
    args = {"world": cases.world([[[1]]]),
            "ops": [{"op": "new", "kwargs": {"init_scale": 4096.0}}, *items,
                    {"op": "scale", "values": values, "dtype": "float16", "container": container}]}
    results = _run(student, args)
    nested = container == "nested"
    what = say("what.nested") if nested else say("what.lists", container=container)
    # a call on one tensor that fails is told as that: the container's sentence would not describe it
    expect.no_errors(args, results[:-1], say("what.lists_item", container="list" if nested else container))
    expect.no_errors(args, results, what)
    singles = [r["ok"]["items"][0] for r in results[1:-1]]
    want = {"ok": {"container": "list", "items": [singles[0], {"container": "tuple", "items": singles[1:]}]}
            if nested else {"container": container, "items": singles}}
    if not expect.close(want["ok"], results[-1]["ok"]):
        expect.mismatch(args, len(args["ops"]) - 1, expect.shown(args["ops"][-1], want, should=True), results[-1],
                        what=what)


def state_round_trip(student: Any, kwargs: dict[str, Json], overflows: Sequence[bool]) -> None:
    """state_dict() has torch's keys and values; load_state_dict() restores a saved state (yours or torch's)."""
    args = cases.run_args(kwargs, overflows)
    args["ops"].append({"op": "state_dict"})
    saved = _run(student, args)
    what = say("what.state")
    expect.no_errors(args, saved, what)
    own = saved[-1]["ok"]
    reference = cases.torch_results(args)[-1]["ok"]
    if not isinstance(own, dict) or sorted(own) != sorted(reference):
        expect.mismatch(args, len(args["ops"]) - 1, say("do.print_keys", keys=sorted(reference)), saved[-1], what=what)
    for state, source in ((own, say("state_source.yours")), (reference, "torch.amp.GradScaler")):
        restore = {"world": args["world"],
                   "ops": [{"op": "new", "kwargs": {}}, {"op": "load_state_dict", "state": dict(state)},
                           {"op": "state_dict"}, {"op": "observe"}]}
        results = _run(student, restore)
        expect.no_errors(restore, results, what)
        state = {**state, "scale": cases.float32(float(state["scale"]))}  # loading rounds it (row 1.7 grades that)
        want = {"state_dict": state, "observe": {"scale": state["scale"], "tracker": state["_growth_tracker"]}}
        for index, op in enumerate(restore["ops"]):
            if op["op"] in want and not expect.close(want[op["op"]], results[index]["ok"]):
                expect.mismatch(restore, index, expect.shown(op, {"ok": want[op["op"]]}, should=True), results[index],
                                what=say("what.state_source", what=what, source=source))


def defaults(student: Any) -> None:
    """The constructor's defaults are torch's: 2**16, 2.0, 0.5, 2000 (read from state_dict() and the scale)."""
    args = {"world": cases.world([[[2]]]),
            "ops": [{"op": "new", "kwargs": {}}, {"op": "observe"}, {"op": "state_dict"}]}
    expected, got = cases.torch_results(args), _run(student, args)
    what = say("what.defaults")
    expect.no_errors(args, got, what)
    expect.check_results(args, expected, got, only=["observe"], what=what)
    saved, reference = got[-1]["ok"], expected[-1]["ok"]
    if isinstance(saved, dict):  # only the keys it has: the key names are row 1.16's
        want = {key: reference[key] for key in saved if key in reference}
        if not expect.close(want, {key: saved[key] for key in want}):
            expect.mismatch(args, 2, say("do.print_state", state=want), got[-1], what=what)
