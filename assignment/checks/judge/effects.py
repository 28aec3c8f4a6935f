"""How Task 2's effects compare, in words: the shipped half of the judge of ``amp_step``.

A row of Task 2 is judged on *effects* (see :mod:`checks.runners.probes`): the parameters, their
gradients, the scaler's state and the returned loss after every call, copied out as plain data.  This
module compares two such records (:func:`differences`) and says what the probe's log shows
(:func:`call_order`, :func:`explain`).  What the effects are compared *with* is not here: the grader
replays a reference ``amp_step`` (in the grader's own files, never shipped), and a student's local run of
the public checks reads the effects it recorded (:mod:`checks.judge.recorded`).

Everything here is plain data in, plain data out; the log is untrusted and read defensively.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable

from checks.runners.harness import Json
from checks.words import error_text, quoted, say

#: Task 2's behaviours, one a row: the key its public and hidden tests, this judge, the grader's replay
#: (``autograder.engine.amp_reference``), the recorded effects and the messages (``amp.right.<key>``,
#: ``amp.hint.<key>``) know it by.  The rubric alone gives each its row: number, title, points.
FORWARD = "forward_under_autocast"
BACKWARD = "backward_outside_autocast"
SCALED_BACKWARD = "backward_of_scaled_loss"
ZERO_GRAD = "zero_grad_every_step"
STEP = "step_through_scaler"
UPDATE = "update_after_step"
CLIPPING = "unscale_before_clipping"
RETURNED_LOSS = "returned_loss"
ANY_SCALER = "any_scaler"
BEHAVIOURS = (FORWARD, BACKWARD, SCALED_BACKWARD, ZERO_GRAD, STEP, UPDATE, CLIPPING, RETURNED_LOSS, ANY_SCALER)

#: Tolerances, relative to the largest reference magnitude of the tensor compared: loose enough for
#: honest differences in float order (a clip coefficient computed by hand: ~1e-7), tight enough for
#: one rounding to float16 (backward or loss outside/inside autocast: ~1e-4).
GRAD_TOLERANCE = 1e-5
PARAM_TOLERANCE = 1e-6
LOSS_TOLERANCE = 1e-5


def calls_of(result: dict[str, Json]) -> list[list[dict[str, Json]]]:
    """The log split into one list of events per amp_step call (entries that are not records are dropped)."""
    calls: list[list[dict[str, Json]]] = []
    for event in result.get("log", []):
        if not isinstance(event, dict):
            continue
        if event.get("event") == "call":
            calls.append([])
        elif calls:
            calls[-1].append(event)
    return calls


def _finite_mismatch(expected: list[float], got: list[float], tolerance: float) -> bool:
    if len(expected) != len(got):
        return True
    scale = max((abs(e) for e in expected if math.isfinite(e)), default=0.0)
    for e, g in zip(expected, got):
        if not isinstance(g, float):
            return True
        if math.isfinite(e) or math.isfinite(g):
            if not (math.isfinite(e) and math.isfinite(g) and abs(e - g) <= tolerance * scale):
                return True
        elif math.isnan(e) != math.isnan(g) or (not math.isnan(e) and e != g):
            return True
    return False


def _values(value: Json, size: int) -> Json:
    """A copied-out gradient: None stands for zeros (SGD treats both alike); a note stays a note."""
    return [0.0] * size if value is None else value


def _shown(values: Json, limit: int = 3) -> str:
    if not isinstance(values, list):
        return str(values)
    head = ", ".join(f"{v:.9g}" if isinstance(v, float) else repr(v) for v in values[:limit])
    return f"[{head}{', ...' if len(values) > limit else ''}]"


def _worst(want: list[float], have: Json) -> int | None:
    """The element of ``have`` that differs most from ``want`` (None when they cannot be compared element-wise)."""
    if isinstance(have, str) or len(want) != len(have) or not want:
        return None

    def gap(pair: tuple[float, float]) -> float:
        e, g = pair
        return math.inf if math.isfinite(e) != math.isfinite(g) else (abs(e - g) if math.isfinite(e) else 0.0)

    return max(range(len(want)), key=lambda i: gap((want[i], have[i])))


def _mismatch(name: str, want: list[float], have: Json, raw: tuple[Json, Json] = ((), ())) -> str:
    """One differing tensor: its first values and the element that differs most.  A side whose ``raw`` value (as
    copied out, before :func:`_values`) is None is shown as None: a gradient never made is not a list of zeros."""
    worst = _worst(want, have)
    shown_want, shown_have = ("None" if r is None else _shown(v) for r, v in zip(raw, (want, have)))
    if worst is None or "None" in (shown_want, shown_have):
        return say("effects.mismatch", name=name, want=shown_want, have=shown_have)
    return say("effects.mismatch_worst", name=name, want=shown_want, have=shown_have, worst=worst,
               expected=f"{want[worst]:.9g}", found=f"{have[worst]:.9g}")


STAGES = {0: "ready", 1: "unscaled", 2: "stepped"}  # torch's OptState for the optimizer
PARAM_NAMES = ("layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias")


def _param_name(index: int) -> str:
    return PARAM_NAMES[index] if index < len(PARAM_NAMES) else say("effects.parameter", number=index)


def _refusal(result: dict[str, Json], index: int) -> str | None:
    """The scaler call whose refusal ended call ``index``, as the probe's log names it (messages only)."""
    calls = calls_of(result)
    events = calls[index] if index < len(calls) else []
    last = events[-1] if events else {}
    return str(last.get("call")) if last.get("event") == "scaler error" else None


def own_error(result: dict[str, Json]) -> tuple[int, dict[str, Json]] | None:
    """The first call of an underflow run (:func:`checks.runners.probes.run_underflow`) that raised an error of
    its own, not torch's refusal of a scaler call (the log's last event in that call): its number and the error."""
    calls, logged = result.get("calls") or [], calls_of(result)
    for index, call in enumerate(calls):
        error = call.get("error") if isinstance(call, dict) else None
        events = logged[index] if index < len(logged) else []
        if isinstance(error, dict) and not (events and events[-1].get("event") == "scaler error"):
            return index + 1, error
    return None


def _error_line(result: dict[str, Json], index: int, error: dict[str, Json], *, should: bool) -> str:
    """Call ``index``'s error in words: torch's refusal of a named scaler call, or the submission's own error."""
    text = error_text(error)
    refused = _refusal(result, index)
    if should:
        return say("effects.should_raise", number=index + 1, call=refused or "?", error=text)
    if refused is not None:
        return say("effects.refused", number=index + 1, call=refused, error=text, trace=quoted(error)["trace"])
    return say("effects.raised", number=index + 1, **quoted(error))


@dataclasses.dataclass(frozen=True)
class Difference:
    """One way two probe results differ: the line a message shows, and what a snippet replaying the calls up to
    call ``call`` (0-based) prints for it (:mod:`checks.judge.amp_snippet`).

    ``kind`` says what is printed: "param", "grad" or "backward_grad" (element ``element`` of parameter
    ``param``: the parameter, its gradient after the call, its gradient as the call's last backward pass left it),
    "scaler" (scale, growth tracker, stage), "returned_value", "returned_type", "returned_size",
    "returned_attached" (what the call returned), "error" (the call raised, or should have); "other" when no snippet
    can show it.  ``want`` and ``have`` are what the snippet's last line prints for a correct ``amp_step`` and for
    the submission's (for "error", the error "Type: message", or None for a call that raises nothing).
    """

    line: str
    call: int
    kind: str = "other"
    want: str | None = None
    have: str | None = None
    param: int | None = None
    element: int | None = None


def _tensor_difference(where: str, index: int, kind: str, number: int, name: str, want: list[float],
                       have: Json, raw: tuple[Json, Json] = ((), ())) -> Difference:
    worst = _worst(want, have)
    return Difference(f"{where}: {_mismatch(name, want, have, raw)}", index, kind if worst is not None else "other",
                      f"{want[worst]:.9g}" if worst is not None else None,
                      f"{have[worst]:.9g}" if worst is not None else None, number, worst)


def _scaler_text(state: dict[str, Json]) -> str:
    """The scaler's (scale, tracker, stage) as a message and a snippet show them."""
    scale = state.get("scale")
    return (f"{scale:g}" if isinstance(scale, float) else str(scale)) + \
        f", {state.get('tracker')}, {STAGES.get(state.get('stage'), state.get('stage'))}"


def _error_text(error: dict[str, Json] | None) -> str | None:
    return None if not error else error_text(error)


def differences(expected: dict[str, Json], got: dict[str, Json], *, returned: bool = False) -> list[str]:
    """How the effects ``got`` differ from ``expected`` (both probe results), one line per difference.

    Only the first call whose effects differ is described: until then the submission and the replay saw
    the same inputs and state, so every expected value shown is what the replay's ``amp_step`` does in the
    very situation the submission's call was in.  An error is an effect like the others: a call torch's
    scaler refuses must be refused in both, with the same error.
    """
    return [found.line for found in difference_items(expected, got, returned=returned)]


def difference_items(expected: dict[str, Json], got: dict[str, Json], *, returned: bool = False) -> list[Difference]:
    """:func:`differences`, each line with what a snippet shows of it."""
    found: list[Difference] = []
    want_steps, have_steps = expected["steps"], got.get("steps", [])
    for index, want in enumerate(want_steps):
        where = say("effects.after_call", number=index + 1)
        if index >= len(have_steps):
            found.append(Difference(say("effects.none_back", where=where), index))
            break
        have = have_steps[index]
        want_error, have_error = want.get("error"), have.get("error")
        if have_error and not want_error:
            found.append(Difference(_error_line(got, index, have_error, should=False), index, "error", None,
                                    _error_text(have_error)))
            break
        if want_error and (not have_error or (want_error.get("type"), want_error.get("message"))
                           != (have_error.get("type"), have_error.get("message"))):
            found.append(Difference(
                _error_line(expected, index, want_error, should=True)
                + (say("effects.but_raised", error=error_text(have_error)) if have_error else say("effects.but_returned")),
                index, "error", _error_text(want_error), _error_text(have_error)))
        if any(len(have.get(key, [])) != len(want[key]) for key in ("params", "grads", "backward_grads")):
            found.append(Difference(say("effects.wrong_count", where=where), index))
            break
        for number, (w, h) in enumerate(zip(want["params"], have["params"])):
            if isinstance(h, str) or _finite_mismatch(w, h, PARAM_TOLERANCE):
                found.append(_tensor_difference(where, index, "param", number, _param_name(number), w, h))
        for number, raw in enumerate(zip(want["grads"], have["grads"])):
            size = len(want["params"][number])
            w, h = _values(raw[0], size), _values(raw[1], size)
            if isinstance(h, str) or _finite_mismatch(w, h, GRAD_TOLERANCE):
                found.append(_tensor_difference(where, index, "grad", number, _param_name(number) + ".grad", w, h,
                                                raw))
        for number, (w, h) in enumerate(zip(want["backward_grads"], have.get("backward_grads", []))):
            size = len(want["params"][number])
            w, h = _values(w, size), _values(h, size)
            if isinstance(h, str) or _finite_mismatch(w, h, GRAD_TOLERANCE):
                name = say("effects.backward_grad", name=_param_name(number))
                found.append(_tensor_difference(where, index, "backward_grad", number, name, w, h))
        if want["scaler"] != have.get("scaler"):
            w, h = _scaler_text(want["scaler"]), _scaler_text(have.get("scaler") or {})
            found.append(Difference(say("effects.scaler", where=where, want=w, have=h), index,
                                    "scaler" if have.get("scaler") else "other", w, h))
        if returned and "ok" in want and "ok" in have:
            found += _returned_differences(index, want["ok"], have.get("ok"))
        if found:
            break
    return found


def _returned_differences(index: int, want: dict[str, Json], have: Any) -> list[Difference]:
    where = say("effects.call", number=index + 1)
    if not isinstance(have, dict) or have.get("type") != "Tensor":
        kind = have.get("type") if isinstance(have, dict) else have
        return [Difference(say("effects.returned_type", where=where, kind=kind), index, "returned_type", "Tensor",
                           str(kind))]
    if have.get("numel") != 1:
        return [Difference(say("effects.returned_size", where=where, numel=have.get("numel")), index, "returned_size",
                           "1", str(have.get("numel")))]
    if have.get("requires_grad"):
        return [Difference(say("effects.returned_attached", where=where), index, "returned_attached", "False", "True")]
    value, expected = have.get("value"), want["value"]
    if not isinstance(value, float) or _finite_mismatch([expected], [value], LOSS_TOLERANCE):
        return [Difference(say("effects.returned_value", where=where, value=repr(value), expected=f"{expected:.7g}"),
                           index, "returned_value", repr(expected), repr(value))]
    return []


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Why a row fails (``lines``; none when it passes); ``masked_by`` names the behaviour that left the
    row's own no effect to judge by, when that is why."""

    lines: list[str]
    masked_by: str | None = None
    #: the first difference, with what a snippet shows of it (None for a masked row)
    first: Difference | None = None

    @classmethod
    def of(cls, found: list[Difference]) -> "Verdict":
        """The verdict of :func:`difference_items`'s result."""
        return cls([item.line for item in found], first=found[0] if found else None)

    def __bool__(self) -> bool:
        return bool(self.lines)


def call_order(result: dict[str, Json], index: int = 0) -> str:
    """What the probe saw during call ``index`` (for failure messages; never graded)."""
    calls = calls_of(result)
    if index >= len(calls):
        return say("order.never_made")
    words = []
    for event in calls[index]:
        kind = str(event.get("event"))
        if kind in ("forward", "loss", "backward"):
            kind = say(f"phase.{kind}") + (say("order.autocast", dtype=event.get("dtype")) if event.get("autocast") is True
                                            else say("order.no_autocast"))
        elif kind == "optimizer.step" and event.get("via_scaler") is not True:
            kind = say("order.direct_step")
        elif kind == "scaler error":
            kind = say("order.scaler_error", call=event.get("call"), error=event.get("error"))
        words.append(kind)
    return " -> ".join(words) or say("order.nothing")


def explain(row: str, result: dict[str, Json], args: dict[str, Json], call: int = 0) -> str:
    """What the log of call ``call`` (0-based: the call whose effects first differ) says about row ``row``'s
    behaviour, to explain a failure (never graded; "" when it says nothing).  A sentence naming a call names that
    one."""
    calls = calls_of(result)
    events = list(calls[call]) if 0 <= call < len(calls) else []
    kinds = [e.get("event") for e in events]
    given = args.get("dtype", "float16")
    number = call + 1
    if row == FORWARD:
        wrong = [e for e in events if e.get("event") in ("forward", "loss")
                 and (e.get("autocast") is not True or e.get("dtype") != given)]
        said = "; ".join(say("explain.ran_under", event=say(f"phase.{e.get('event')}"), dtype=e.get("dtype"))
                         if e.get("autocast") is True else say("explain.ran_without", event=say(f"phase.{e.get('event')}"))
                         for e in wrong)
        return said[:1].upper() + said[1:] + "." if said else ""  # a sentence of its own: the hint follows
    if row == BACKWARD and any(e.get("event") == "backward" and e.get("autocast") is True for e in events):
        return say("explain.backward_inside")
    if row == SCALED_BACKWARD and "backward" in kinds:
        scale = next((e.get("scale") for e in events if e.get("event") == "scale"), None)
        ratio = events[kinds.index("backward")].get("grad_ratio")
        if isinstance(ratio, float):
            return say("explain.grad_ratio", ratio=f"{ratio:.4g}", scale=scale)
    if row == STEP and any(e.get("event") == "optimizer.step" and e.get("via_scaler") is not True for e in events):
        return say("explain.direct_step")
    if row == STEP and kinds.count("scaler.step") > 1:
        return say("explain.step_twice", number=number, count=kinds.count("scaler.step"))
    if row == UPDATE:
        said = say("explain.updates", number=number, count=kinds.count("update")) + (
            say("explain.updates_before_step") if "update" in kinds and "scaler.step" in kinds
            and kinds.index("update") < kinds.index("scaler.step") else say("explain.updates_end"))
        return said + (say("explain.update_twice") if kinds.count("update") > 1 else "")
    if row == CLIPPING and "clip_grad_norm_" in kinds and "unscale_" in kinds \
            and kinds.index("clip_grad_norm_") < kinds.index("unscale_"):
        return say("explain.clip_before_unscale", number=number)
    if row == CLIPPING and args.get("max_grad_norm") is not None and "unscale_" not in kinds:
        return say("explain.no_unscale")
    if row == CLIPPING and "scaler.step" in kinds and "unscale_" in kinds[kinds.index("scaler.step"):]:
        return say("explain.unscale_after_step", number=number)
    if row == CLIPPING and kinds.count("unscale_") > 1:
        return say("explain.unscale_twice", number=number, count=kinds.count("unscale_"))
    return ""


def all_lines(lines: Iterable[str], limit: int = 8) -> str:
    kept = list(lines)
    more = len(kept) - limit
    return "\n".join(["    " + line for line in kept[:limit]] + ([say("effects.more", more=more)] if more > 0 else []))
