"""Row 2.10's other half: the underflow run's weight must be reached by AMP steps, call after call.

The final loss (measured by the judge from the copied-out weight) says only where training
ended; an ``amp_step`` that wrote the least-squares answer into the weight would reach it too.
So every call of the run is replayed here, in the judge's process: from the state the previous
call left (weight, gradient, torch's scaler as recorded by
:func:`checks.runners.probes.run_underflow`), the reference ``amp_step`` of a configuration the
run's log suggests makes one call, and its effects (weight, gradient, scaler state, error) must
be the submission's.  The suggestions are those of the probe's log
(:func:`autograder.engine.amp_reference.suggested_configs`), so an honest bug elsewhere is replayed
too and costs only its own row; a log that lies earns nothing, since no configuration writes an
answer into the weight.

The grader's alone, like the reference it replays: the grader installs :func:`judge_calls` for the
public check (:func:`checks.judge.recorded.install`); a student's local run judges row 2.10 by the
final loss and by the errors of its own a call raised (:func:`checks.judge.effects.own_error`).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any

import torch

from autograder.engine.amp_reference import Config, reference_amp_step, suggested_configs
from checks import words
from checks.judge.effects import GRAD_TOLERANCE, PARAM_TOLERANCE, _finite_mismatch, _shown
from checks.runners.harness import Json, describe_error, torch_scaler
from checks.runners.probes import underflow_data
from autograder.engine.judge_words import say


def candidates(result: dict[str, Json], args: dict[str, Json]) -> list[Config]:
    """The configurations to replay: the log's suggestions, the loss scaled either way (the demo's model has
    no probe at its output to tell), backward where it is (torch's own backward ops ignore autocast)."""
    found = [dataclasses.replace(config, scaled=scaled, backward=None)
             for config in suggested_configs(result, {"dtype": "float16", **args}) for scaled in (True, False)]
    return list(dict.fromkeys(found))


@lru_cache(maxsize=4)
def _data(seed: int, n: int, d: int, target_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    return underflow_data({"seed": seed, "n": n, "d": d, "target_scale": target_scale})


def _initial(args: dict[str, Json], d: int) -> dict[str, Json]:
    scale = float(torch_scaler(**args.get("scaler_kwargs", {})).get_scale())
    return {"weight": [0.0] * d, "grad": None,
            "scaler": {"scale": scale, "tracker": 0, "stage": 0, "found_inf": None}}


def replay_call(args: dict[str, Json], config: Config, before: dict[str, Json]) -> dict[str, Json]:
    """One call of ``reference_amp_step(config)`` from the state ``before``; its record, as the run's."""
    from torch.amp.grad_scaler import OptState

    from checks.runners.optimizers import PlainSGD

    x, y = _data(int(args.get("seed", 0)), int(args.get("n", 4096)), int(args.get("d", 16)),
                 float(args.get("target_scale", 1e-4)))
    model = torch.nn.Linear(x.shape[1], 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor(before["weight"], dtype=torch.float32).reshape(1, -1))
    if before["grad"] is not None:
        model.weight.grad = torch.tensor(before["grad"], dtype=torch.float32).reshape(1, -1)
    optimizer = PlainSGD(model.parameters(), lr=float(args.get("lr", 0.25)))
    scaler = torch_scaler(**args.get("scaler_kwargs", {}))
    state = before["scaler"]
    scaler._scale.fill_(state["scale"])
    scaler._growth_tracker.fill_(state["tracker"])
    if state["stage"]:
        entry = scaler._per_optimizer_states[id(optimizer)]
        entry["stage"] = OptState(state["stage"])
        if state.get("found_inf") is not None:
            entry["found_inf_per_device"] = {torch.device("cpu"): torch.full((1,), float(state["found_inf"]))}
    record: dict[str, Json] = {}
    try:
        reference_amp_step(config)(model, x, y, torch.nn.functional.mse_loss, optimizer, scaler,
                                   device_type="cpu", dtype=torch.float16)
    except Exception as exc:  # noqa: BLE001 - a refusal the configuration makes is an effect
        record["error"] = describe_error(exc, None)
    grad = model.weight.grad
    entry = scaler._per_optimizer_states.get(id(optimizer), {})
    found = list(entry.get("found_inf_per_device", {}).values())
    record.update(weight=model.weight.detach().reshape(-1).tolist(),
                  grad=None if grad is None else grad.reshape(-1).tolist(),
                  scaler={"scale": float(scaler._scale.item()), "tracker": int(scaler._growth_tracker.item()),
                          "stage": int(entry["stage"].value) if "stage" in entry else 0,
                          "found_inf": float(sum(f.item() for f in found)) if found else None})
    return record


def _differs(want: dict[str, Json], have: dict[str, Json]) -> str | None:
    """How the call record ``have`` differs from the replay's ``want`` (None: the same effects)."""
    error = lambda r: (r["error"]["type"], r["error"]["message"]) if "error" in r else None  # noqa: E731
    if "error" in have and "error" not in want:  # the submission's own error, in full
        return say("underflow.raised", **words.quoted(have["error"]))
    if error(want) != error(have):
        return say("underflow.error", want=error(want), have=error(have))
    if isinstance(have["weight"], str) or _finite_mismatch(want["weight"], have["weight"], PARAM_TOLERANCE):
        return say("underflow.weight", want=_shown(want["weight"]), have=_shown(have["weight"]))
    size = len(want["weight"])
    w, h = want["grad"] or [0.0] * size, have["grad"] or [0.0] * size
    if isinstance(h, str) or _finite_mismatch(w, h, GRAD_TOLERANCE):
        return say("underflow.grad", want=_shown(w), have=_shown(h))
    if {k: v for k, v in want["scaler"].items() if k != "found_inf"} != \
            {k: v for k, v in (have["scaler"] or {}).items() if k != "found_inf"}:
        return say("underflow.scaler", want=want["scaler"], have=have["scaler"])
    return None


def judge_calls(args: dict[str, Json], result: dict[str, Json]) -> str | None:
    """Why the run's calls are not AMP steps (the first call no suggested configuration reproduces), or None."""
    calls: list[Any] = result.get("calls") or []
    configs = candidates(result, args)
    if not calls:
        return say("underflow.no_calls")
    before = _initial(args, int(args.get("d", 16)))
    for index, have in enumerate(calls):
        first: str | None = None
        for number, config in enumerate(configs):
            found = _differs(replay_call(args, config, before), have)
            if found is None:
                configs.insert(0, configs.pop(number))  # the next call most likely makes the same choices
                break
            first = first or found
        else:
            return say("underflow.not_amp", number=index + 1, why=first)
        before = have
    return None
