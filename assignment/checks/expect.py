"""Student-facing failure messages: what was called, what was expected, what happened.

Scaler scenarios are lists of ops (see :func:`checks.harness.run_scaler_ops`).
:func:`snippet` turns them into a short Python program that a student can paste
to reproduce a failure; hypothesis shrinks the ops first, so the program shown is
a minimal counterexample.  Messages never include test source code.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

Json = Any


def fail(message: str) -> None:
    """Fail the current check with ``message`` (shown to the student as is)."""
    __tracebackhide__ = True
    raise AssertionError(message)


def number(value: Json) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else '-float("inf")'
    if isinstance(value, list):
        return "[" + ", ".join(number(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {number(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _kwargs(values: dict[str, Json]) -> str:
    return ", ".join(f"{key}={number(value)}" for key, value in values.items())


def op_line(op: dict[str, Json]) -> str:
    """One op as the Python statement it stands for."""
    kind, opt = op["op"], f"opt{op.get('opt', 0)}"
    if kind == "new":
        return f"scaler = ToyLossScaler({_kwargs(op.get('kwargs', {}))})"
    if kind == "grads":
        dtype = op.get("dtype", "float32")
        values = ", ".join("None" if v is None else f"torch.tensor({number(v)}, dtype=torch.{dtype})"
                           for v in op["values"])
        return f"set_grads({opt}, [{values}])"
    if kind == "scale":
        dtype = op.get("dtype", "float16")
        tensors = [f"torch.tensor({number(v)}, dtype=torch.{dtype})" for v in op["values"]]
        container = op.get("container", "tensor")
        given = tensors[0] if container == "tensor" else (
            f"[{', '.join(tensors)}]" if container == "list" else f"({', '.join(tensors)},)")
        return f"scaler.scale({given})"
    if kind in ("unscale_", "step"):
        return f"scaler.{kind}({opt})"
    if kind == "update":
        return "scaler.update()" if op.get("new_scale") is None else f"scaler.update(new_scale={number(op['new_scale'])})"
    if kind == "clip":
        return f"torch.nn.utils.clip_grad_norm_(params({opt}), {number(op['max_norm'])})"
    if kind == "observe":
        return "scaler.get_scale(), scaler.get_growth_tracker()"
    if kind == "params":
        return f"[p.tolist() for p in params({opt})]"
    if kind == "grads_of":
        return f"[None if p.grad is None else p.grad.tolist() for p in params({opt})]"
    if kind == "state_dict":
        return "scaler.state_dict()"
    if kind == "load_state_dict":
        return f"scaler.load_state_dict({number(op['state'])})"
    return repr(op)


def snippet(args: dict[str, Json], upto: int | None = None) -> str:
    """A runnable program that replays ``args["ops"][:upto + 1]``."""
    ops = args["ops"] if upto is None else args["ops"][: upto + 1]
    lines = [
        "import torch",
        "from loss_scaler import ToyLossScaler",
        "params = lambda opt: [p for g in opt.param_groups for p in g['params']]",
        "def set_grads(opt, grads):",
        "    for p, g in zip(params(opt), grads):",
        "        p.grad = g",
        "g = torch.Generator().manual_seed(0)",
    ]
    for index, spec in enumerate(args["world"]["optimizers"]):
        cast = f".to(torch.{spec['dtype']})" if spec.get("dtype", "float32") != "float32" else ""
        groups = ", ".join(
            "{'params': [" + ", ".join(f"torch.nn.Parameter(torch.randn({size}, generator=g){cast})" for size in sizes)
            + "]}" for sizes in spec["groups"])
        lines.append(f"opt{index} = torch.optim.SGD([{groups}], lr={spec.get('lr', 0.1)})")
    lines += [op_line(op) for op in ops]
    return "\n".join("    " + line for line in lines)


def describe(result: dict[str, Json]) -> str:
    if "error" in result:
        return f"raised {result['error']['type']}: {result['error']['message']}"
    return f"returned {number(result['ok'])}"


def close(expected: Json, got: Json, rel: float = 0.0) -> bool:
    """Structural equality with a relative tolerance on floats (NaN equals NaN)."""
    if isinstance(expected, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        if math.isnan(expected) or math.isnan(got):
            return math.isnan(expected) and math.isnan(got)
        return expected == got or (rel > 0 and math.isclose(expected, got, rel_tol=rel))
    if isinstance(expected, dict) and isinstance(got, dict):
        return expected.keys() == got.keys() and all(close(expected[k], got[k], rel) for k in expected)
    if isinstance(expected, list) and isinstance(got, list):
        return len(expected) == len(got) and all(close(e, g, rel) for e, g in zip(expected, got))
    return type(expected) is type(got) and expected == got


def raised(result: dict[str, Json], error: str) -> bool:
    return "error" in result and error in result["error"]["mro"]


def check_results(args: dict[str, Json], expected: Sequence[dict[str, Json]], got: Sequence[dict[str, Json]],
                  *, rel: float = 0.0, only: Iterable[str] | None = None, what: str = "") -> None:
    """Fail at the first op whose result differs from the reference's.

    Errors are compared by type only (the student's error must be the same type
    or a subclass).  ``only`` restricts the comparison to some op kinds.
    """
    __tracebackhide__ = True
    if len(got) != len(args["ops"]) or len(expected) != len(args["ops"]):
        fail(f"{len(got)} results came back for {len(args['ops'])} calls: your code's process returned something "
             "malformed")
    kinds = set(only) if only is not None else None
    for index, (op, want, have) in enumerate(zip(args["ops"], expected, got)):
        unexpected_error = "error" in have and "error" not in want  # always a failure, whatever ``only`` says
        if kinds is not None and op["op"] not in kinds and not unexpected_error:
            continue
        if "error" in want:
            ok = raised(have, want["error"]["type"])
        else:
            ok = "ok" in have and close(want["ok"], have["ok"], rel)
        if not ok:
            trace = have.get("error", {}).get("trace", "")
            fail(
                (f"{what}\n" if what else "")
                + f"After running:\n{snippet(args, index)}\n"
                + f"the last call should have {describe(want)}\n"
                + f"but it {describe(have)}"
                + (f"\n\nYour traceback:\n{trace}" if trace and "error" not in want else "")
            )


def no_errors(args: dict[str, Json], results: Sequence[dict[str, Json]], what: str = "") -> None:
    """Fail at the first call that raised, showing the calls that led to it."""
    __tracebackhide__ = True
    for index, result in enumerate(results):
        if "error" in result:
            fail((f"{what}\n" if what else "") + f"After running:\n{snippet(args, index)}\n"
                 f"the last call raised {result['error']['type']}: {result['error']['message']}\n"
                 f"{result['error'].get('trace', '')}")


def ok_or_fail(result: dict[str, Json], what: str) -> Json:
    """The value of a student call, or a failure saying what it raised."""
    __tracebackhide__ = True
    if "error" in result:
        fail(f"{what}\nbut your code raised {result['error']['type']}: {result['error']['message']}\n"
             f"{result['error'].get('trace', '')}")
    return result["ok"]
