"""Task 1's scenario operations, one table read on both sides of the trust boundary.

A Task-1 scenario (``scaler_ops``) is a list of ops: calls on the student's ``ToyLossScaler`` or on the
harness's own optimizers.  :data:`OPS` declares each op once:

* ``run``: how it runs, in the student's process against the submission and in the judge against torch's
  scaler (:func:`checks.runners.harness.run_scaler_ops` dispatches through this table), and ``needs_scaler``:
  after a failed constructor, the ops that need a scaler are answered "no scaler" instead of run;
* ``reply``: the shape of its result, which the judge checks before believing a student process
  (:mod:`checks.judge.replies`, in the grader and the public checks alike);
* ``line``: the Python statement it stands for in a failure's snippet; ``prints``: whether the snippet prints
  that statement's value when the op is not the last; ``last_lines``: the lines that run it and print what is
  compared when it is (default: ``print(line)`` or ``line``); ``printed``: what those lines print for a result,
  None for an op that prints nothing (:mod:`checks.judge.expect` quotes it in the failure message).

Nothing here is an answer or a reference behaviour: the module ships to students and runs in their processes.
:func:`incomplete` names an op whose entry lacks a part (tests/test_ops_table.py fails on it).

One file past 400 lines: the op table is declared once, here, with the runners and snippet lines it names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from checks.runners.optimizers import RecordingSGD
from checks.runners.plain import is_plain_tensor, read_plainly, param_grad, tensor_values, tensors_values

Json = Any
Check = Callable[[Json], "str | None"]


# --------------------------------------------------------------------------- the world the ops act on


def build_optimizers(world: dict[str, Json]) -> list[RecordingSGD]:
    """Optimizers over float32 params: ``world["optimizers"][i]["groups"]`` lists param sizes per group.

    ``world["device"]`` (default "cpu") places the params; their values never depend on it.
    """
    generator = torch.Generator().manual_seed(int(world.get("seed", 0)))
    device = world.get("device", "cpu")
    optimizers = []
    for spec in world["optimizers"]:
        dtype = getattr(torch, spec.get("dtype", "float32"))
        groups = [
            {"params": [torch.nn.Parameter(torch.randn(size, generator=generator).to(device=device, dtype=dtype))
                        for size in sizes]}
            for sizes in spec["groups"]
        ]
        optimizers.append(RecordingSGD(groups, lr=float(spec.get("lr", 0.1))))
    return optimizers


def all_params(optimizer: torch.optim.Optimizer) -> list[torch.nn.Parameter]:
    return [p for group in optimizer.param_groups for p in group["params"]]


@dataclass
class Scene:
    """What one scenario's ops act on: the harness's optimizers, and the scaler once ``new`` built one."""

    optimizers: list[RecordingSGD]
    make_scaler: Callable[..., Any]
    device: str = "cpu"
    scaler: Any = None


# --------------------------------------------------------------------------- how each op runs


def _new(scene: Scene, op: dict[str, Json], _opt: Any) -> Json:
    scene.scaler = scene.make_scaler(**op.get("kwargs", {}))
    return None


def _set_grads(_scene: Scene, op: dict[str, Json], optimizer: Any) -> Json:
    dtype = op.get("dtype", "float32")
    for param, value in zip(all_params(optimizer), op["values"]):
        if value is None:
            param.grad = None
        else:
            # Straight to the dtype asked for: from Python floats that rounds exactly as through float64 would.
            grad = torch.tensor(value, dtype=getattr(torch, dtype)).reshape(param.shape)
            param.grad = grad.to(device=param.device)
    return None


def _given(container: str, items: list[Any]) -> Any:
    """scale()'s argument from its tensors (or their source text): one tensor, a list or tuple of them, or
    ``"nested"``, a list holding the first and a tuple of the rest (the handout's "nested as you like")."""
    if container == "tensor":
        return items[0]
    if container == "nested":
        return [items[0], tuple(items[1:])]
    return list(items) if container == "list" else tuple(items)


def _record(value: Any, depth: int) -> Json:
    """A tensor as its dtype and values; below a nested argument a list or tuple as its items, ``depth`` levels."""
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype).replace("torch.", ""), "values": tensor_values(value)}
    if depth and isinstance(value, (list, tuple)):
        return {"container": type(value).__name__, "items": [_record(item, depth - 1) for item in value]}
    return {"dtype": type(value).__name__, "values": []}


def _scale(scene: Scene, op: dict[str, Json], _opt: Any) -> Json:
    dtype = getattr(torch, op.get("dtype", "float16"))
    tensors = [torch.tensor(v, dtype=dtype, device=scene.device) for v in op["values"]]
    container = op.get("container", "tensor")
    result = scene.scaler.scale(_given(container, tensors))
    items = [result] if container == "tensor" else result
    depth = 2 if container == "nested" else 0
    return {"container": type(result).__name__, "items": [_record(item, depth) for item in items]}


_DATA_PTR = torch.Tensor.data_ptr


def _unscale(scene: Scene, _op: dict[str, Json], optimizer: Any) -> Json:
    """``unscale_``'s effects: whether each gradient the harness handed in is still the parameter's
    gradient, same storage (in place), and the values those very tensors hold afterwards."""
    before = [param_grad(p) for p in all_params(optimizer)]
    pointers = read_plainly(lambda: [None if g is None or not is_plain_tensor(g) else _DATA_PTR(g) for g in before])
    scene.scaler.unscale_(optimizer)
    after = [param_grad(p) for p in all_params(optimizer)]
    in_place = read_plainly(lambda: all(b is a and (b is None or (is_plain_tensor(a) and _DATA_PTR(a) == ptr))
                                        for b, a, ptr in zip(before, after, pointers)))
    return {"in_place": in_place, "grads": [None if g is None else tensor_values(g) for g in before]}


def _step(scene: Scene, _op: dict[str, Json], optimizer: Any) -> Json:
    """``step``'s effects: whether the parameters changed (the optimizer stepped) and what it returned."""
    before = str(tensors_values(all_params(optimizer)))
    returned = scene.scaler.step(optimizer)
    changed = str(tensors_values(all_params(optimizer))) != before
    return {"called": changed, "returned": float(returned) if type(returned) is float else None}


def _new_scale(op: dict[str, Json]) -> Any:
    """``update``'s ``new_scale``: None, a Python float, or (``"tensor": true``) a one-element float32 tensor."""
    value = op.get("new_scale")
    return torch.tensor(value, dtype=torch.float32) if value is not None and op.get("tensor") else value


def _update(scene: Scene, op: dict[str, Json], _opt: Any) -> Json:
    scene.scaler.update(_new_scale(op))
    return None


def _update_line(op: dict[str, Json]) -> str:
    if op.get("new_scale") is None:
        return "scaler.update()"
    value = number(op["new_scale"])
    return f"scaler.update(new_scale=torch.tensor({value}, dtype=torch.float32))" if op.get("tensor") \
        else f"scaler.update(new_scale={value})"


def grads_of(optimizer: torch.optim.Optimizer) -> list[Json]:
    return [None if param_grad(p) is None else tensor_values(param_grad(p)) for p in all_params(optimizer)]


def observe(scaler: Any) -> dict[str, Json]:
    tracker = getattr(scaler, "get_growth_tracker", None) or scaler._get_growth_tracker  # torch's is private
    return {"scale": float(scaler.get_scale()), "tracker": int(tracker())}


def _load_state_dict(scene: Scene, op: dict[str, Json], _opt: Any) -> Json:
    scene.scaler.load_state_dict(dict(op["state"]))
    return None


#: What the generic ``call`` op passes back: the plain values a JSON reply holds exactly (type by type: a bool is
#: not an int here, a numpy or torch scalar is none of them).
PLAIN_TYPES = (bool, int, float, str, type(None))


def _method(op: dict[str, Json]) -> str:
    """The method a ``call`` op names: the judge's data, still refused unless a public method's name (no
    dunder or private attribute, nothing that is not a name), in the student's process and in the snippet alike."""
    method = op["method"]
    if not (isinstance(method, str) and method.isidentifier() and not method.startswith("_")):
        raise ValueError(f"call: {method!r} is not the name of a public method")
    return method


def _arguments(op: dict[str, Json]) -> list[Json]:
    """The positional arguments a ``call`` op passes (``"args"``, none by default): plain values only (the judge's
    data, refused otherwise in the student's process and in the snippet alike)."""
    args = op.get("args", [])
    if not (isinstance(args, list) and all(type(value) in PLAIN_TYPES for value in args)):
        raise ValueError(f"call: {args!r} is not a list of plain values")
    return args


def _call(scene: Scene, op: dict[str, Json], _opt: Any) -> Json:
    """``scaler.<method>(*args)``, plain values in (none by default), for a method whose result is a plain value
    (torch's ``is_enabled()``, ``get_growth_interval()``; ``scale(2.0)``, which raises): any other result is the
    student's TypeError, not a reply."""
    result = getattr(scene.scaler, _method(op))(*_arguments(op))
    if type(result) not in PLAIN_TYPES:
        raise TypeError(f"{op['method']}() returned a {type(result).__name__}: a bool, int, float, str or None "
                        "was expected")
    return result


# --------------------------------------------------------------------------- what a result may look like
# Exact keys and JSON types: the judge believes nothing else from a student process.


def is_float(value: Json) -> bool:
    return isinstance(value, float)


def floats(value: Json) -> bool:
    return isinstance(value, list) and all(is_float(v) for v in value)


def error_problem(value: Json) -> str | None:
    """What is wrong with an error record (:func:`checks.runners.harness.describe_error`), or None."""
    if not (isinstance(value, dict) and set(value) - {"said"} == {"type", "mro", "message", "trace"}):
        return "an error record without exactly type, mro, message and trace"
    if not (isinstance(value["type"], str) and isinstance(value["message"], str) and isinstance(value["trace"], str)
            and isinstance(value["mro"], list) and all(isinstance(m, str) for m in value["mro"])):
        return "an error record with wrong types"
    return None


def _nothing(value: Json) -> str | None:
    return None if value is None else "a value where the op returns nothing"


def _grads(value: Json) -> bool:
    return isinstance(value, list) and all(v is None or floats(v) for v in value)


def _scale_reply(value: Json, depth: int = 3) -> str | None:
    if not (isinstance(value, dict) and set(value) == {"container", "items"} and isinstance(value["container"], str)
            and isinstance(value["items"], list)):
        return "a scale() record of the wrong shape"
    for item in value["items"]:
        if isinstance(item, dict) and set(item) == {"container", "items"} and depth:
            problem = _scale_reply(item, depth - 1)
            if problem:
                return problem
        elif not (isinstance(item, dict) and set(item) == {"dtype", "values"} and isinstance(item["dtype"], str)
                  and floats(item["values"])):
            return "a scale() item of the wrong shape"
    return None


def _unscale_reply(value: Json) -> str | None:
    ok = isinstance(value, dict) and set(value) == {"in_place", "grads"} and isinstance(value["in_place"], bool)
    return None if ok and _grads(value["grads"]) else "an unscale_() record of the wrong shape"


def _step_reply(value: Json) -> str | None:
    ok = (isinstance(value, dict) and set(value) == {"called", "returned"} and isinstance(value["called"], bool)
          and (value["returned"] is None or is_float(value["returned"])))
    return None if ok else "a step() record of the wrong shape"


def _observe_reply(value: Json) -> str | None:
    ok = (isinstance(value, dict) and set(value) == {"scale", "tracker"} and is_float(value["scale"])
          and type(value["tracker"]) is int)
    return None if ok else "an observation of the wrong shape"


def _plain_reply(value: Json) -> str | None:
    return None if type(value) in PLAIN_TYPES else "a call() result that is not a bool, int, float, str or None"


def _state_reply(value: Json) -> str | None:
    ok = isinstance(value, dict) and all(isinstance(k, str) and (v is None or type(v) in (int, float, bool, str))
                                         for k, v in value.items())
    return None if ok else "a state_dict record of the wrong shape"


# --------------------------------------------------------------------------- how each op reads in a snippet


def number(value: Json) -> str:
    """``value`` as Python source (inf/NaN spelled so that the snippet runs)."""
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


def kwargs_text(values: dict[str, Json]) -> str:
    return ", ".join(f"{key}={number(value)}" for key, value in values.items())


def _opt(op: dict[str, Json]) -> str:
    return f"opt{op.get('opt', 0)}"


def _grads_line(op: dict[str, Json]) -> str:
    dtype = op.get("dtype", "float32")
    values = ", ".join("None" if v is None else f"torch.tensor({number(v)}, dtype=torch.{dtype})" for v in op["values"])
    return f"set_grads({_opt(op)}, [{values}])"


def _scale_line(op: dict[str, Json]) -> str:
    dtype = op.get("dtype", "float16")
    tensors = [_Source(f"torch.tensor({number(v)}, dtype=torch.{dtype})") for v in op["values"]]
    container = op.get("container", "tensor")
    if container in ("tensor", "nested"):
        given = repr(_given(container, tensors))
    else:
        given = f"[{', '.join(tensors)}]" if container == "list" else f"({', '.join(tensors)},)"
    return f"scaler.scale({given})"


class _Source(str):
    """Source text that a container's repr() shows as code (a tuple of one keeps its comma)."""

    def __repr__(self) -> str:
        return str(self)


def _scale_lines(op: dict[str, Json], _step_return: bool) -> list[str]:
    container = op.get("container", "tensor")
    if container == "tensor":
        return [f"result = {_scale_line(op)}", "print(result.dtype, result.tolist())"]
    if container == "nested":
        return [f"result = {_scale_line(op)}",
                "show = lambda x: (type(x).__name__, [show(v) for v in x]) if isinstance(x, (list, tuple)) "
                "else (x.dtype, x.tolist()) if isinstance(x, torch.Tensor) else type(x).__name__",
                "print(show(result))"]
    return [f"result = {_scale_line(op)}", "print(type(result).__name__, [(t.dtype, t.tolist()) for t in result])"]


def _unscale_lines(op: dict[str, Json], _step_return: bool) -> list[str]:
    opt = _opt(op)
    return [f"before = [p.grad for p in params({opt})]", f"scaler.unscale_({opt})",
            f"print(all(p.grad is b for p, b in zip(params({opt}), before)), "
            f"[None if b is None else b.tolist() for b in before])"]


def _step_lines(op: dict[str, Json], step_return: bool) -> list[str]:
    """Prints 1 if the step changed the parameters (the effect compared), else 0; and first what step()
    returned when that is compared."""
    opt = _opt(op)
    before = f"before = str([p.tolist() for p in params({opt})])"
    changed = f"int(str([p.tolist() for p in params({opt})]) != before)"
    if step_return:
        return [before, f"result = scaler.step({opt})", f"print(result, {changed})"]
    return [before, f"scaler.step({opt})", f"print({changed})"]


def _value(value: Json) -> str:
    """How Python's print() shows a plain value (floats, lists, dicts, None)."""
    return str(value)


def _nested_printed(record: Json, given: Any) -> str:
    """What the nested snippet's ``show`` prints for ``record`` (``given``: the values each tensor came from)."""
    if isinstance(record, dict) and "items" in record:
        inner = ", ".join(_nested_printed(item, given) for item in record["items"])
        return f"({record['container']!r}, [{inner}])"
    values = record.get("values", []) if isinstance(record, dict) else []
    source = next(given, None)
    dtype = str(record.get("dtype", "")) if isinstance(record, dict) else ""
    if not values and (dtype in ("float", "int", "complex") or not isinstance(getattr(torch, dtype, None), torch.dtype)):
        return repr(dtype)  # not a tensor: ``show`` prints its type's name
    shown = values[0] if not isinstance(source, list) and len(values) == 1 else values
    return f"(torch.{record.get('dtype')}, {_value(shown)})"


def _scale_printed(op: dict[str, Json], value: Json, _step_return: bool) -> str | None:
    if not isinstance(value, dict):
        return None
    if op.get("container") == "nested":
        return _nested_printed(value, iter(op["values"]))
    texts = []
    for given, item in zip(op["values"], value.get("items", [])):
        values = item.get("values", [])
        shown_values = values[0] if not isinstance(given, list) and len(values) == 1 else values
        texts.append((f"torch.{item.get('dtype')}", shown_values))
    if op.get("container", "tensor") == "tensor":
        return f"{texts[0][0]} {_value(texts[0][1])}" if texts else ""
    inner = ", ".join(f"({dtype}, {_value(v)})" for dtype, v in texts)
    return f"{value.get('container')} [{inner}]"


def _unscale_printed(_op: dict[str, Json], value: Json, _step_return: bool) -> str | None:
    return f"{value.get('in_place')} {_value(value.get('grads'))}" if isinstance(value, dict) else None


def _step_printed(_op: dict[str, Json], value: Json, step_return: bool) -> str | None:
    if not isinstance(value, dict):
        return None
    calls = int(bool(value.get("called")))
    return f"{value.get('returned')} {calls}" if step_return else f"{calls}"


def _observe_printed(_op: dict[str, Json], value: Json, _step_return: bool) -> str | None:
    return f"{_value(value.get('scale'))} {_value(value.get('tracker'))}" if isinstance(value, dict) else None


def _plain(op: dict[str, Json], value: Json, _step_return: bool) -> str:
    return _value(value)


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Op:
    """One scenario operation (see the module's docstring); every part but ``last_lines`` is required, and
    ``printed`` is None only for an op whose snippet line prints nothing."""

    run: Callable[[Scene, dict[str, Json], Any], Json] | None = None
    needs_scaler: bool = True
    reply: Check | None = None
    line: Callable[[dict[str, Json]], str] | None = None
    printed: Callable[[dict[str, Json], Json, bool], "str | None"] | None = None
    prints: bool = False
    last_lines: Callable[[dict[str, Json], bool], list[str]] | None = None

    def snippet_lines(self, op: dict[str, Json], step_return: bool = True) -> list[str]:
        """The snippet lines that run ``op`` as the last op and print what is compared."""
        if self.last_lines is not None:
            return self.last_lines(op, step_return)
        return [f"print({self.line(op)})"] if self.prints else [self.line(op)]


def _opt_call(method: str) -> Callable[[dict[str, Json]], str]:
    return lambda op: f"scaler.{method}({_opt(op)})"


#: Every op a Task-1 scenario may hold (the hidden tests, the public checks and the judge's cases use no other).
OPS: dict[str, Op] = {
    "new": Op(run=_new, needs_scaler=False, reply=_nothing,
              line=lambda op: f"scaler = ToyLossScaler({kwargs_text(op.get('kwargs', {}))})"),
    "grads": Op(run=_set_grads, needs_scaler=False, reply=_nothing, line=_grads_line),
    "scale": Op(run=_scale, reply=_scale_reply, line=_scale_line, printed=_scale_printed, last_lines=_scale_lines),
    "unscale_": Op(run=_unscale, reply=_unscale_reply, line=_opt_call("unscale_"), printed=_unscale_printed,
                   last_lines=_unscale_lines),
    "step": Op(run=_step, reply=_step_reply, line=_opt_call("step"), printed=_step_printed, last_lines=_step_lines),
    "update": Op(run=_update, reply=_nothing, line=_update_line),
    "clip": Op(run=lambda _s, op, opt: float(torch.nn.utils.clip_grad_norm_(all_params(opt), op["max_norm"])),
               needs_scaler=False,
               reply=lambda v: None if is_float(v) else "a clip_grad_norm_ result that is not a float",
               line=lambda op: f"float(torch.nn.utils.clip_grad_norm_(params({_opt(op)}), {number(op['max_norm'])}))",
               printed=_plain, prints=True),
    "observe": Op(run=lambda scene, _op, _opt: observe(scene.scaler), reply=_observe_reply,
                  line=lambda _op: "float(scaler.get_scale()), int(scaler.get_growth_tracker())",
                  printed=_observe_printed, prints=True),
    "params": Op(run=lambda _s, _op, opt: [tensor_values(p) for p in all_params(opt)], needs_scaler=False,
                 reply=lambda v: None if isinstance(v, list) and all(floats(p) for p in v)
                 else "a params record of the wrong shape",
                 line=lambda op: f"[p.tolist() for p in params({_opt(op)})]", printed=_plain, prints=True),
    "grads_of": Op(run=lambda _s, _op, opt: grads_of(opt), needs_scaler=False,
                   reply=lambda v: None if _grads(v) else "a gradients record of the wrong shape",
                   line=lambda op: f"[None if p.grad is None else p.grad.tolist() for p in params({_opt(op)})]",
                   printed=_plain, prints=True),
    "state_dict": Op(run=lambda scene, _op, _opt: {k: v for k, v in scene.scaler.state_dict().items()},
                     reply=_state_reply, line=lambda _op: "scaler.state_dict()", printed=_plain, prints=True),
    "load_state_dict": Op(run=_load_state_dict, reply=_nothing,
                          line=lambda op: f"scaler.load_state_dict({number(op['state'])})"),
    # Any ToyLossScaler method called with plain values (or none) whose result is a plain value, e.g.
    # {"op": "call", "method": "is_enabled"} or {"op": "call", "method": "scale", "args": [2.0]}: a check of such a
    # call needs no op of its own.
    "call": Op(run=_call, reply=_plain_reply, printed=_plain, prints=True,
               line=lambda op: f"scaler.{_method(op)}({', '.join(number(value) for value in _arguments(op))})"),
}


def incomplete(table: dict[str, Op] | None = None) -> list[str]:
    """One line per op of ``table`` (default :data:`OPS`) that lacks a part, naming the op and the part."""
    missing = []
    for name, entry in (OPS if table is None else table).items():
        for part in ("run", "reply", "line"):
            if not callable(getattr(entry, part)):
                missing.append(f"op {name!r} has no {part}")
        if entry.prints and entry.printed is None:
            missing.append(f"op {name!r} prints its value but says nothing of how it is printed (printed)")
        if entry.last_lines is not None and entry.printed is None:
            missing.append(f"op {name!r} prints its own last lines but says nothing of what they print (printed)")
    return missing
