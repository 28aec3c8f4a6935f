"""The judge of Task 2: ``amp_step``'s effects against a configurable reference ``amp_step``.

A row of Task 2 earns its points from *effects* only: after every call of the probe
(:func:`checks.runners.probes.run_amp_probe`), the parameters, their gradients, the scaler's scale
and growth tracker and (row 2.8) the returned loss, copied out as plain data by the harness.
The judge reruns the same scenario in its own process with :func:`reference_amp_step`, an
``amp_step`` whose every behaviour is a switch of :class:`Config`, and torch's scaler.

One cause, one deduction: the probe's log (what the submission called) only *suggests* its
configuration (:func:`suggested_configs`); a row passes iff the submission's effects equal
the replay of a suggested configuration with the row's own behaviour set right
(:data:`ROW_FIXES`).  An honest bug elsewhere is reproduced by the replay and costs only
its own row; a log that lies earns nothing, because the effects must still be those of a
program right on the row.  Effects that no suggested configuration reproduces (a bug the
switches do not model, or a forged log) fail every row that compares them.

Everything here is plain data in, plain data out; the log is untrusted and read defensively.
It is the grader's alone, never shipped: a correct reference ``amp_step`` would pass Task 2 copied
into a submission.  The comparison and its words are shipped (:mod:`checks.judge.effects`); the grader
installs :func:`judge` for the public checks (:func:`checks.judge.recorded.install`), and a student's
local run reads effects recorded from it instead (``make student``).
"""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from typing import Any, Callable

import torch

from checks.judge import effects
from checks.judge.effects import Verdict, calls_of, difference_items, differences
from checks.runners.harness import Json, torch_scaler
from autograder.engine.judge_words import say

GIVEN = "given"  # the dtype amp_step was called with
OTHER = "other"  # the autocast dtype amp_step was not called with
DTYPES = ("float16", "bfloat16")


@dataclasses.dataclass(frozen=True)
class Config:
    """The behaviours of an ``amp_step``; the defaults are the correct ones.

    ``forward``/``loss``/``backward``: the autocast dtype each runs under (``GIVEN``, a dtype
    name, or None for outside autocast; backward is right outside).  ``half_model``: calls
    ``model.half()`` instead.  ``scaled``: backward of ``scaler.scale(loss)`` (else of the
    loss).  ``zero_grad``: "before" the forward, "after_backward", "after_step" or "never".
    ``clipping``: "correct" (when max_grad_norm is given: unscale_, then clip),
    "unscale_always" (unscale_ even without clipping), "unscale_twice" (unscale_ before clipping and
    again before the step), "after_step" (unscale_ and clip after scaler.step), "clip_then_unscale",
    "clip_only", "no_clip".  ``step``: "scaler", "twice" (scaler.step twice), "direct" (optimizer.step()) or
    "never".  ``update``: "after_step", "twice" (after the step, twice), "before_step", "never" or
    "after_clean_step" (a loop that checks the gradients itself and, when one overflowed, returns
    before stepping and so before ``update()`` too) or "when_clean" (steps, then updates only when
    the gradients were finite).  A call torch's scaler refuses raises, in the replay as in the
    probe (:class:`checks.runners.probes.ScalerProbe`): the replay makes the same calls.
    """

    forward: str | None = GIVEN
    loss: str | None = GIVEN
    backward: str | None = None
    half_model: bool = False
    scaled: bool = True
    zero_grad: str = "before"
    clipping: str = "correct"
    step: str = "scaler"
    update: str = "after_step"


CORRECT = Config()

#: Per row, the configuration with that row's behaviour set right (2.7 also needs a step: the
#: unscaled, clipped gradients must reach the parameters).
ROW_FIXES: dict[str, Callable[[Config], Config]] = {
    effects.FORWARD: lambda c: dataclasses.replace(c, forward=GIVEN, loss=GIVEN, half_model=False),
    effects.BACKWARD: lambda c: dataclasses.replace(c, backward=None),
    effects.SCALED_BACKWARD: lambda c: dataclasses.replace(c, scaled=True),
    effects.ZERO_GRAD: lambda c: dataclasses.replace(c, zero_grad="before"),
    effects.STEP: lambda c: dataclasses.replace(c, step="scaler"),
    effects.UPDATE: lambda c: dataclasses.replace(c, update="after_step"),
    effects.CLIPPING: lambda c: dataclasses.replace(c, clipping="correct",
                                                    step="scaler" if c.step == "never" else c.step),
    effects.RETURNED_LOSS: lambda c: c,  # the returned loss is compared on top
    effects.ANY_SCALER: lambda c: c,  # the same effects with any scaler of the contract, called by keyword too
}

_R = dataclasses.replace
#: Per row, the wrong ways of its behaviour.  A row is earned only if the effects rule out every one
#: of them (with the other behaviours as suggested): a behaviour that leaves no effect (all gradients
#: cleared before the step, say) cannot be vouched for by a log, so it earns nothing.
ROW_BREAKS: dict[str, Callable[[Config], list[Config]]] = {
    effects.FORWARD: lambda c: [_R(c, forward=None, loss=None), _R(c, loss=None), _R(c, forward=None),
                      _R(c, forward=OTHER, loss=OTHER), _R(c, forward=None, loss=None, half_model=True)],
    effects.BACKWARD: lambda c: [_R(c, backward=GIVEN)],
    effects.SCALED_BACKWARD: lambda c: [_R(c, scaled=False)],
    effects.ZERO_GRAD: lambda c: [_R(c, zero_grad=z) for z in ("never", "after_backward", "after_step")],
    # With the gradients cleared before the step torch's scaler refuses the first step too: a second has no effect.
    effects.STEP: lambda c: [_R(c, step=s) for s in ("direct", "never") + (("twice",) if c.zero_grad != "after_backward"
                                                                    else ())],
    effects.UPDATE: lambda c: [_R(c, update=u)
                               for u in ("never", "before_step", "after_clean_step", "when_clean", "twice")],
    effects.CLIPPING: lambda c: [_R(c, clipping=k) for k in ("clip_then_unscale", "clip_only", "no_clip",
                                                             "unscale_twice", "after_step")] + [_R(c, step="never")],
    # The returned loss itself is compared, in the calls that return: a call that ends with a refusal its other
    # choices make returns nothing in the replay either, and that refusal costs the row of the call refused (a
    # refusal made on purpose to hide the return costs more than this row's points).
    effects.RETURNED_LOSS: lambda c: [],
    effects.ANY_SCALER: lambda c: [],  # no error and the same effects
}


def reference_amp_step(config: Config) -> Callable[..., torch.Tensor]:
    """An ``amp_step`` (the contract's signature) that behaves as ``config`` says."""

    def amp_step(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor, loss_fn: Callable[..., Any],
                 optimizer: torch.optim.Optimizer, scaler: Any, *, device_type: str = "cuda",
                 dtype: torch.dtype = torch.float16, max_grad_norm: float | None = None) -> torch.Tensor:
        def autocast(name: str | None) -> Any:
            if name == OTHER:
                chosen = torch.bfloat16 if dtype == torch.float16 else torch.float16
            else:
                chosen = dtype if name == GIVEN else getattr(torch, name or "float16")
            return torch.autocast(device_type=device_type, dtype=chosen, enabled=name is not None)

        if config.zero_grad == "before":
            optimizer.zero_grad(set_to_none=True)
        if config.half_model:
            model.half()
            inputs = inputs.half()
        with autocast(config.forward):
            outputs = model(inputs)
        with autocast(config.loss):
            loss = loss_fn(outputs.float() if config.half_model else outputs, targets)
        with autocast(config.backward):
            (scaler.scale(loss) if config.scaled else loss).backward()
        if config.zero_grad == "after_backward":
            optimizer.zero_grad(set_to_none=True)
        params = [param for group in optimizer.param_groups for param in group["params"]]
        clip = max_grad_norm is not None and config.clipping != "no_clip"

        def clip_grads() -> None:
            if config.clipping == "unscale_always" or (config.clipping in ("correct", "unscale_twice", "after_step")
                                                       and clip):
                scaler.unscale_(optimizer)
            if clip:
                torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            if config.clipping == "clip_then_unscale" and clip:
                scaler.unscale_(optimizer)

        def finite() -> bool:
            return all(bool(torch.isfinite(p.grad).all()) for p in params if p.grad is not None)

        if config.clipping != "after_step":
            clip_grads()
        if config.clipping == "unscale_twice":  # again, "to be sure" (refused after a first one)
            scaler.unscale_(optimizer)
        if config.update == "before_step":
            scaler.update()
        if config.update == "after_clean_step" and not finite():
            return loss.detach()
        for _ in range({"scaler": 1, "twice": 2}.get(config.step, 0)):
            scaler.step(optimizer)
        if config.step == "direct":
            optimizer.step()
        if config.clipping == "after_step":
            clip_grads()
        updates = {"after_step": 1, "after_clean_step": 1, "twice": 2, "when_clean": int(finite())}
        for _ in range(updates.get(config.update, 0)):
            scaler.update()
        if config.zero_grad == "after_step":
            optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return amp_step


# --------------------------------------------------------------------------- what the log suggests



def _first(call: list[dict[str, Json]], kind: str) -> tuple[int, dict[str, Json]] | None:
    return next(((i, e) for i, e in enumerate(call) if e.get("event") == kind), None)


def _dtype(event: dict[str, Json] | None, given: str) -> str | None:
    if event is None or event.get("autocast") is not True or event.get("dtype") not in DTYPES:
        return None
    return GIVEN if event["dtype"] == given else OTHER


def _number(value: Json, default: float) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def suggested_configs(result: dict[str, Json], args: dict[str, Json]) -> list[Config]:
    """The configurations the probe's log suggests (untrusted: a suggestion is only ever replayed)."""
    calls = calls_of(result) or [[]]
    first = calls[0]
    kinds = [e.get("event") for e in first]
    given = args.get("dtype", "float16")
    forward, loss, backward = (_first(first, kind) for kind in ("forward", "loss", "backward"))
    scale = _first(first, "scale")
    ratio = _number(backward[1].get("grad_ratio"), 1.0) if backward else 1.0
    scale_value = _number(scale[1].get("scale"), 1.0) if scale else 1.0
    backward_at = backward[0] if backward else len(first)
    steps_at = [i for i, k in enumerate(kinds) if k in ("scaler.step", "optimizer.step")]
    zeroes = [i for i, k in enumerate(kinds) if k == "zero_grad"]
    if any(i < backward_at for i in zeroes):
        zero_grad = "before"
    elif steps_at and any(i > steps_at[0] for i in zeroes):
        zero_grad = "after_step"
    elif zeroes:
        zero_grad = "after_backward"
    else:
        clear = all(e.get("grads_clear") is not False for call in calls for e in call if e.get("event") == "backward")
        zero_grad = "before" if clear else "never"
    stepped = [e for call in calls for e in call if e.get("event") == "optimizer.step"]
    if any(e.get("via_scaler") is not True for e in stepped):
        step = "direct"
    else:
        step = "scaler" if any(e.get("event") == "scaler.step" for call in calls for e in call) else "never"
        step = "twice" if step == "scaler" and kinds.count("scaler.step") > 1 else step
    if "update" not in kinds:
        update = "never"
    elif "scaler.step" in kinds and kinds.index("update") < kinds.index("scaler.step"):
        update = "before_step"
    else:
        update = "twice" if kinds.count("update") > 1 else "after_step"
    updated = [any(e.get("event") == "update" for e in call) for call in calls]
    updates = [update, "after_clean_step", "when_clean"] if any(updated) and not all(updated) else [update]
    clipping_given = args.get("max_grad_norm") is not None
    if "unscale_" in kinds and "scaler.step" in kinds and kinds.index("unscale_") > kinds.index("scaler.step"):
        clippings = ["after_step"]
    elif kinds.count("unscale_") > 1:
        clippings = ["unscale_twice"]
    elif "unscale_" in kinds:
        clippings = ["correct", "clip_then_unscale"] if clipping_given else ["unscale_always"]
    else:
        clippings = ["clip_only", "no_clip"] if clipping_given else ["correct"]
    base = Config(
        forward=_dtype(forward[1] if forward else None, given), loss=_dtype(loss[1] if loss else None, given),
        backward=_dtype(backward[1] if backward else None, given),
        half_model=bool(forward) and forward[1].get("param_dtype") in DTYPES,
        scaled=scale is not None and abs(ratio - 1.0) > abs(ratio - scale_value),
        zero_grad=zero_grad, step=step, update=update)
    # Without a scale() call in the log the loss may still have been scaled another way (by the scaler's own
    # scale read directly, say): both are replayed, and the effects decide.
    scalings = [base.scaled] if scale is not None else [False, True]
    return [dataclasses.replace(base, clipping=clipping, scaled=scaled, update=chosen)
            for chosen in updates for scaled in scalings for clipping in clippings]


# --------------------------------------------------------------------------- replay and comparison


@lru_cache(maxsize=256)
def _replay(args_text: str, config: Config) -> str:
    from checks.runners.probes import ContractScaler, run_amp_probe  # probes imports the harness; no cycle at import time

    args = json.loads(args_text)
    make_scaler = ContractScaler if args.get("scaler") == "contract" else torch_scaler
    return json.dumps(run_amp_probe(args, reference_amp_step(config), make_scaler))


def replay(args: dict[str, Json], config: Config) -> dict[str, Json]:
    """What the probe reports for ``reference_amp_step(config)`` with torch's scaler (memoized: plain data)."""
    return json.loads(_replay(json.dumps(args, sort_keys=True), config))



def judge(row: str, args: dict[str, Json], result: dict[str, Json]) -> Verdict:
    """Whether row ``row`` fails for the probe result ``result`` of the scenario ``args``, and why.

    The row passes iff, for a configuration the log suggests with the row's behaviour set right
    (:data:`ROW_FIXES`), the replay gives the same effects and every wrong way of the behaviour
    (:data:`ROW_BREAKS`) would have given other effects.  Otherwise the verdict says what differs
    (for the first suggestion), or which other behaviour leaves the row's no effect.
    """
    fixed = list(dict.fromkeys(ROW_FIXES[row](config) for config in suggested_configs(result, args)))
    returned = row == effects.RETURNED_LOSS
    found = Verdict([])
    for config in fixed:
        items = difference_items(replay(args, config), result, returned=returned)
        if items:
            found = found or Verdict.of(items)
            continue
        hidden = [b for b in ROW_BREAKS[row](config) if not differences(replay(args, b), result, returned=returned)]
        if not hidden:
            return Verdict([])
        masked_by = describe_config(config, args)
        found = found or Verdict([say("effects.masked", wrong=describe_config(hidden[0], args, config),
                                      masked=masked_by)], masked_by)
    return found


def describe_config(config: Config, args: dict[str, Json], base: Config = CORRECT) -> str:
    """The behaviours of ``config`` that differ from ``base`` (a correct amp_step), in words."""
    given = args.get("dtype", "float16")
    other = "bfloat16" if given == "float16" else "float16"
    where = {GIVEN: say("config.autocast", dtype=given), OTHER: say("config.autocast", dtype=other),
             None: say("config.no_autocast")}
    words = []
    for name in ("forward", "loss", "backward"):
        value = getattr(config, name)
        if value != getattr(base, name):
            words.append(say("config.under", name=say(f"phase.{name}"), where=where.get(value, value)))
    if config.half_model != base.half_model:
        words.append(say("config.half") if config.half_model else say("config.no_half"))
    if config.scaled != base.scaled:
        words.append(say("config.unscaled_backward") if not config.scaled else say("config.scaled_backward"))
    for name in ("zero_grad", "clipping", "step", "update"):
        value = getattr(config, name)
        if value != getattr(base, name):
            words.append(say(f"config.{name}", value=say(f"config.value.{value}")))
    return ", ".join(words) or say("config.correct")


