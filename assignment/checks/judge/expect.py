"""Student-facing failure messages: what was called, what was expected, what happened.

Scaler scenarios are lists of ops (see :data:`checks.runners.ops.OPS`: each op's snippet line and printed form).
:func:`snippet` turns them into a short Python program that a student can paste
into a file next to ``loss_scaler.py`` and run: it rebuilds the same parameters and
optimizers as the grader (including an SGD whose ``step()`` returns a recognisable
number, as the grader's does) and its last line *prints* the observation that was
compared, exactly as :func:`shown` renders it in the message.  So the program prints
the wrong value the grader saw, and a correct scaler prints the expected one.
hypothesis shrinks the ops first, so the program shown is a minimal counterexample.
Messages never include test source code.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from checks.runners.ops import OPS, kwargs_text, number  # noqa: F401 - number: this module's API
from checks.words import error_text, localised, quoted, say

Json = Any

#: Lines that define the optimizer class of every snippet that calls ``step``: it behaves like
#: ``checks.runners.optimizers.RecordingSGD`` (SGD whose ``step()`` returns 1000.0 + its number of calls).
#: Whether a step happened is judged by its effect (the parameters changed), never by the count.
SGD_CLASS = [
    "class SGD(torch.optim.SGD):  # {comment}",
    "    calls = 0",
    "    def step(self, closure=None):",
    "        self.calls += 1",
    "        super().step(closure)",
    "        return 1000.0 + self.calls",
]


def fail(message: str) -> None:
    """Fail the current check with ``message``, shown to the student as is (a student process's message quoted in it
    was rendered where it was quoted: :func:`checks.words.quoted`)."""
    __tracebackhide__ = True
    raise AssertionError(message)


_kwargs = kwargs_text  # the public checks' parametrize ids use this name


def op_line(op: dict[str, Json]) -> str:
    """One op as the Python statement it stands for (its ``line`` in :data:`checks.runners.ops.OPS`)."""
    entry = OPS.get(op["op"])
    return entry.line(op) if entry is not None else repr(op)


def printing_lines(op: dict[str, Json], step_return: bool = True) -> list[str]:
    """``op`` as the statements that run it and print what the grader compares (see :func:`shown`)."""
    entry = OPS.get(op["op"])
    return entry.snippet_lines(op, step_return) if entry is not None else [repr(op)]


#: A snippet's first lines after ``import torch``: torch's scaler taken out, as wherever loss_scaler.py runs (run
#: next to ``checks/``, in the assignment folder), so that code leaving work to it fails here as in the grader.
ABSENCE = ["from checks.student.absence import remove_reference_scaler", "remove_reference_scaler()"]


#: A block of statements repeated at least this often in a row becomes a loop (a run hundreds of iterations long
#: stays a snippet to paste); below it the statements stay written out, as short runs read best.
LOOP_FROM = 16
_LONGEST_BLOCK = 12


def looped(lines: list[str]) -> list[str]:
    """``lines`` with each block repeated :data:`LOOP_FROM` times or more in a row written once, in a loop (the
    block that covers the most lines first; the shortest of those)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        best_period, best_count = 0, 0
        for period in range(1, _LONGEST_BLOCK + 1):
            block = lines[i:i + period]
            count = 1
            while lines[i + count * period:i + (count + 1) * period] == block:
                count += 1
            if count >= LOOP_FROM and count * period > best_count * best_period:
                best_period, best_count = period, count
        if best_period:
            out.append(f"for _ in range({best_count}):")
            out += ["    " + line for line in lines[i:i + best_period]]
            i += best_period * best_count
        else:
            out.append(lines[i])
            i += 1
    return out


def snippet(args: dict[str, Json], upto: int | None = None, step_return: bool = True) -> str:
    """A runnable program that replays ``args["ops"][:upto + 1]`` and prints the last op's observation."""
    ops = args["ops"] if upto is None else args["ops"][: upto + 1]
    steps = any(op["op"] == "step" for op in ops)
    sgd = [SGD_CLASS[0].format(comment=say("snippet.optimizer_comment")), *SGD_CLASS[1:]] if steps else []
    absence = [f"{ABSENCE[0]}  # {say('snippet.checks_comment')}", *ABSENCE[1:]]
    lines = ["import torch", *absence, "from loss_scaler import ToyLossScaler"] + sgd
    lines += [
        "params = lambda opt: [p for g in opt.param_groups for p in g['params']]",
        "def set_grads(opt, grads):",
        "    for p, g in zip(params(opt), grads):",
        "        p.grad = g",
        f"g = torch.Generator().manual_seed({int(args['world'].get('seed', 0))})",
    ]
    optimizer = "SGD" if steps else "torch.optim.SGD"
    for index, spec in enumerate(args["world"]["optimizers"]):
        cast = f".to(torch.{spec['dtype']})" if spec.get("dtype", "float32") != "float32" else ""
        groups = ", ".join(
            "{'params': [" + ", ".join(f"torch.nn.Parameter(torch.randn({size}, generator=g){cast})" for size in sizes)
            + "]}" for sizes in spec["groups"])
        lines.append(f"opt{index} = {optimizer}([{groups}], lr={spec.get('lr', 0.1)})")
    # Observations before the last are printed too (handy to follow the run); the last line printed is the one compared.
    lines += looped([f"print({op_line(op)})" if getattr(OPS.get(op["op"]), "prints", False) else op_line(op)
                     for op in ops[:-1]])
    if ops:
        lines += printing_lines(ops[-1], step_return)
    return "\n".join("    " + line for line in lines)


def shown(op: dict[str, Json], result: dict[str, Json], step_return: bool = True, should: bool = False) -> str:
    """What the snippet's last line does for ``op`` given the observation ``result`` (``should``: what it should do).

    "prints X", "raises T: message" or "runs without error" (ops that print nothing); with ``should``,
    "print X", "raise T: message" or "run without error".
    """
    mood = "do" if should else "does"
    if "error" in result:
        return say(f"{mood}.raise", error=error_text(result["error"]).rstrip(": "))
    printed = _printed(op, result, step_return)
    if printed is None:
        return say(f"{mood}.run")
    return say(f"{mood}.print_nothing") if printed == "" else say(f"{mood}.print", value=printed)


def _printed(op: dict[str, Json], result: dict[str, Json], step_return: bool) -> str | None:
    """What the snippet's last line prints for ``op`` given the observation ``result`` ("" for nothing), None when
    the op prints nothing at all (its ``printed`` in :data:`checks.runners.ops.OPS`)."""
    printed = getattr(OPS.get(op["op"]), "printed", None)
    return None if printed is None else printed(op, result.get("ok"), step_return)


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


def _compared(op: dict[str, Json], result: dict[str, Json], step_return: bool) -> dict[str, Json]:
    """The part of an observation a check compares: step()'s return value only when ``step_return``."""
    if op["op"] == "step" and not step_return and isinstance(result.get("ok"), dict):
        return {"ok": {"called": result["ok"].get("called")}}
    return result


def mismatch(args: dict[str, Json], index: int, want: str, have: dict[str, Json], *, what: str = "",
             step_return: bool = True) -> None:
    """Fail with the snippet up to op ``index``, what it should do (``want``) and what it did."""
    __tracebackhide__ = True
    trace = quoted(have["error"])["trace"] if "error" in have else ""
    what = localised(what)
    fail((f"{what}\n" if what else "")
         + say("snippet.after", snippet=snippet(args, index, step_return))
         + say("snippet.should", want=want)
         + say("snippet.but", shown=shown(args['ops'][index], have, step_return))
         + (say("snippet.traceback", trace=trace) if trace else ""))


def check_results(args: dict[str, Json], expected: Sequence[dict[str, Json]], got: Sequence[dict[str, Json]],
                  *, rel: float = 0.0, only: Iterable[str] | None = None, what: str = "",
                  step_return: bool = True) -> None:
    """Fail at the first op whose result differs from the reference's.

    Errors are compared by type only (the student's error must be the same type
    or a subclass).  ``only`` restricts the comparison to some op kinds; ``step_return``
    says whether step()'s return value is compared (only the checks that grade it do).
    """
    __tracebackhide__ = True
    if len(got) != len(args["ops"]) or len(expected) != len(args["ops"]):
        fail(say("results.malformed", got=len(got), calls=len(args["ops"])))
    kinds = set(only) if only is not None else None
    for index, (op, want, have) in enumerate(zip(args["ops"], expected, got)):
        unexpected_error = "error" in have and "error" not in want  # always a failure, whatever ``only`` says
        if kinds is not None and op["op"] not in kinds and not unexpected_error:
            continue
        if "error" in want:
            ok = raised(have, want["error"]["type"])
        else:
            ok = "ok" in have and close(_compared(op, want, step_return)["ok"], _compared(op, have, step_return)["ok"], rel)
        if not ok:
            wanted = say("do.raise", error=want["error"]["type"]) if "error" in want else \
                shown(op, want, step_return, should=True)
            mismatch(args, index, wanted, have, what=what, step_return=step_return)


def no_errors(args: dict[str, Json], results: Sequence[dict[str, Json]], what: str = "") -> None:
    """Fail at the first call that raised, showing the calls that led to it."""
    __tracebackhide__ = True
    for index, result in enumerate(results):
        if "error" in result:
            mismatch(args, index, say("do.run"), result, what=what)


def ok_or_fail(result: dict[str, Json], what: str) -> Json:
    """The value of a student call, or a failure saying what it raised."""
    __tracebackhide__ = True
    if "error" in result:
        fail(say("raised.with_trace", what=what, **quoted(result["error"])))
    return result["ok"]
