"""A failing Task-2 row as a program to paste: the probe's model, data and scaler, the ``amp_step`` calls up to the
first one whose effects differ, and a last line that prints what differs.

The program rebuilds what :func:`checks.runners.probes.run_amp_probe` builds, in the same order from the same
seed (the model ``AmpProbe``, SGD, torch's scaler made up front, one batch), so its last line prints the very
value the message shows: the submission's (``have``) with the student's ``amp_step``, the correct one (``want``)
with a correct ``amp_step``.  What is printed comes from :class:`checks.judge.effects.Difference`.  It imports the
probe model from ``checks/``, so it runs in the assignment folder (the message says so on that line).  Row 2.10's
program is the underflow run (:func:`underflow_reproduction`).
"""

from __future__ import annotations

from typing import Any

from checks.judge.effects import PARAM_NAMES, Difference
from checks.words import error_text, say

Json = Any
#: The line that makes the call the message is about (tests swap in a correct amp_step here).
LAST_CALL = "loss = amp_step("


def _call(args: dict[str, Json]) -> str:
    """The amp_step call as the probe makes it (positional or by the contract's names)."""
    given = "model, inputs, targets, model.loss, optimizer, scaler"
    if args.get("by_keyword"):
        given = "model=model, inputs=inputs, targets=targets, loss_fn=model.loss, optimizer=optimizer, scaler=scaler"
    clip = f", max_grad_norm={args['max_grad_norm']!r}" if args.get("max_grad_norm") is not None else ""
    return (f"amp_step({given}, device_type={args.get('device_type', 'cpu')!r}, "
            f"dtype=torch.{args.get('dtype', 'float16')}{clip})")


def _scaler(args: dict[str, Json]) -> tuple[str, str]:
    """The line that makes the scaler, and how the last line names torch's scaler inside it."""
    kwargs = ", ".join(f"{key}={value!r}" for key, value in (args.get("scaler_kwargs") or {}).items())
    if args.get("scaler") == "contract":
        return f"scaler = ContractScaler({kwargs})  # {say('snippet.contract_comment')}", "scaler._inner"
    return f"scaler = torch_scaler({kwargs})  # {say('snippet.torch_scaler_comment')}", "scaler"


def _printing(first: Difference, inner: str) -> list[str]:
    """The lines after the last call: they print ``first``'s value (nothing for an error: the call raises or not)."""
    name = PARAM_NAMES[first.param] if first.param is not None and first.param < len(PARAM_NAMES) else None
    kind, element = first.kind, first.element
    if kind == "param" and name:
        return [f"print(f\"{{model.get_parameter({name!r}).flatten()[{element}].item():.9g}}\")"]
    if kind == "grad" and name:
        return [f"grad = model.get_parameter({name!r}).grad  # {say('snippet.none_grad_comment')}",
                f"print(f\"{{0.0 if grad is None else grad.flatten()[{element}].item():.9g}}\")"]
    if kind == "backward_grad" and name:
        return [f"print(f\"{{seen[{name!r}][{element}]:.9g}}\")"]
    if kind == "scaler":
        return [f"stage = {inner}._per_optimizer_states[id(optimizer)][\"stage\"].name.lower()  "
                f"# {say('snippet.stage_comment')}",
                f"print(f\"{{{inner}.get_scale():g}}, {{{inner}._get_growth_tracker()}}, {{stage}}\")"]
    return {"returned_value": ["print(float(loss))"], "returned_type": ["print(type(loss).__name__)"],
            "returned_size": ["print(loss.numel())"], "returned_attached": ["print(loss.requires_grad)"],
            "error": []}.get(kind, [])


def program(args: dict[str, Json], first: Difference) -> str | None:
    """The program that shows ``first`` (a difference found in the probe scenario ``args``), or None when no
    program can (a call that returned nothing to compare, an unusual scenario)."""
    if first.kind == "other" or args.get("same_batch", True) is not True:
        return None
    printing = _printing(first, _scaler(args)[1])
    if not printing and first.kind != "error":
        return None
    sizes, batch = list(args.get("sizes", [8, 16, 4])), int(args.get("batch", 16))
    injected = list(args.get("inject_inf_at", []))
    imports = ["AmpProbe", "ContractScaler" if args.get("scaler") == "contract" else "torch_scaler"]
    lines = [
        "import torch",
        f"from checks.runners.probes import {', '.join(imports)}  # {say('snippet.checks_comment')}",
        "from amp_step import amp_step",
        f"torch.manual_seed({int(args.get('seed', 0))})",
        f"model = AmpProbe({sizes!r}, {args.get('device_type', 'cpu')!r}, [])  # {say('snippet.model_comment')}",
        f"optimizer = torch.optim.SGD(model.parameters(), lr={float(args.get('lr', 0.01))!r})",
        _scaler(args)[0],
        f"inputs, targets = torch.randn({batch}, {sizes[0]}), torch.randn({batch}, {sizes[-1]})",
    ]
    if first.call > 0:
        lines += [f"for call in range({first.call}):  # {say('snippet.calls_before', number=first.call + 1)}",
                  f"    model._inject_inf = call in {injected!r}  # {say('snippet.inf_comment')}" if injected else None,
                  "    try:",
                  f"        {_call(args)}",
                  "    except Exception as error:",
                  "        print(f\"call {call + 1}: {type(error).__name__}: {error}\")"]
    if injected:
        lines.append(f"model._inject_inf = {first.call in injected}  # {say('snippet.inf_comment')}")
    if first.kind == "backward_grad":
        lines += [f"seen = {{name: [0.0] * p.numel() for name, p in model.named_parameters()}}  "
                  f"# {say('snippet.seen_comment')}",
                  "for name, p in model.named_parameters():",
                  "    p.register_post_accumulate_grad_hook(lambda p, name=name: seen.update({name: p.grad.flatten().tolist()}))"]
    lines.append(LAST_CALL + _call(args)[len("amp_step("):])
    lines += printing
    return "\n".join("    " + line for line in lines if line is not None)


def shown(first: Difference) -> tuple[str, str]:
    """What the program's last line should do (a correct amp_step) and what it does (the submission's)."""
    if first.kind == "error":
        want = say("do.raise", error=first.want) if first.want else say("do.run")
        have = say("does.raise", error=first.have) if first.have else say("does.run")
        return want, have
    return say("do.print", value=first.want), say("does.print", value=first.have)


def reproduction(args: dict[str, Json], first: Difference | None) -> str:
    """The message's paragraph that reproduces ``first`` ("" when no program can)."""
    found = program(args, first) if first is not None else None
    if found is None or first is None:
        return ""
    want, have = shown(first)
    return say("snippet.after", snippet=found) + say("snippet.should", want=want) + say("snippet.but", shown=have)


def underflow_reproduction(args: dict[str, Json], *, raised: tuple[int, dict[str, Json]] | None = None,
                           final: str | None = None) -> str:
    """Row 2.10's paragraph: the underflow run (:func:`checks.runners.probes.run_underflow`) as a program that stops
    at the call that ``raised`` (its number, its error), or prints the ``final`` loss (as the message shows it)."""
    steps = int(args.get("steps", 120))
    before = raised[0] - 1 if raised else steps
    call = (f"amp_step(model, x, y, torch.nn.functional.mse_loss, optimizer, scaler, "
            f"device_type={args.get('device_type', 'cpu')!r}, dtype=torch.float16)")
    kwargs = ", ".join(f"{key}={value!r}" for key, value in (args.get("scaler_kwargs") or {}).items())
    data = {key: value for key, value in args.items() if key in ("seed", "n", "d", "target_scale")}
    lines = [
        "import torch",
        f"from checks.runners.probes import torch_scaler, underflow_data  # {say('snippet.checks_comment')}",
        "from amp_step import amp_step",
        f"x, y = underflow_data({data!r})  # {say('snippet.underflow_data_comment')}",
        "model = torch.nn.Linear(x.shape[1], 1, bias=False)",
        "torch.nn.init.zeros_(model.weight)",
        f"optimizer = torch.optim.SGD(model.parameters(), lr={float(args.get('lr', 0.25))!r})",
        f"scaler = torch_scaler({kwargs})  # {say('snippet.torch_scaler_comment')}",
    ]
    if before:
        last = "" if raised else "loss = "
        lines += [f"for call in range({before}):  # {say('snippet.calls_before', number=before + 1)}" if raised
                  else f"for call in range({before}):",
                  "    try:", f"        {last}{call}", "    except Exception as error:",
                  "        print(f\"call {call + 1}: {type(error).__name__}: {error}\")"]
    if raised:
        lines.append(LAST_CALL + call[len("amp_step("):])
        error = raised[1]
        want, have = say("do.run"), say("does.raise", error=error_text(error))
    else:
        # measured in float32, as the judge measures it, whatever the weight's dtype (model.half() makes it float16)
        lines.append("print(f\"{float(torch.nn.functional.mse_loss(x @ model.weight.detach().float().t(), y)):.3g}\")")
        want, have = say("do.print_loss_below", limit="1e-12"), say("does.print", value=final)
    program = "\n".join("    " + line for line in lines)
    return say("snippet.after", snippet=program) + say("snippet.should", want=want) + say("snippet.but", shown=have)
