"""Reading the handout's executable parts: its sections, its fenced blocks and its ``>>>`` examples.

The handout (``assignment/README.md``, and its Korean edition ``README.ko.md``) shows its
examples as ``pycon`` blocks written in doctest form.  An example's printed result is part
of the contract, so the tests run every block with ``ToyLossScaler`` bound once to the
reference solution and once to ``torch.amp.GradScaler("cpu")``.  A block whose info string
is ``pycon deviation`` shows one of the contract's deliberate deviations from torch: it
must hold for the solution and must *not* hold for torch (otherwise the deviation it
documents is not one).

Shared by ``tests/test_handout.py`` (the English handout) and ``tests/test_handout_sync.py``
(the Korean edition kept in step).
"""

from __future__ import annotations

import doctest
import importlib.util
import math
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

ROOT = Path(__file__).resolve().parents[1]
HANDOUT = ROOT / "assignment" / "README.md"
KOREAN_HANDOUT = ROOT / "assignment" / "README.ko.md"
#: ``ELLIPSIS``: an error's message is shown as ``...``; exception details (the message) are not graded.
DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.IGNORE_EXCEPTION_DETAIL
DEVIATION = "deviation"

_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    """A fenced block of the handout: its info string, its text and the heading it sits under."""

    section: str
    info: str
    text: str
    line: int  # 1-based line of the opening fence

    @property
    def is_example(self) -> bool:
        return self.info.split()[:1] == ["pycon"]

    @property
    def is_deviation(self) -> bool:
        return DEVIATION in self.info.split()[1:]

    @property
    def label(self) -> str:
        return f"{self.section} (line {self.line})"


def headings(text: str) -> list[tuple[int, str]]:
    """(line index, heading text) of every ``#``-heading outside fenced blocks."""
    found, fenced = [], False
    for index, line in enumerate(text.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.append((index, line.strip()))
    return found


def blocks(text: str) -> list[Block]:
    """Every fenced block of ``text``, in order, with the heading above it."""
    marks = headings(text)
    result = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start())
        section = next((heading for index, heading in reversed(marks) if index < line), "(top)")
        result.append(Block(section, match.group("info").strip(), match.group("body"), line + 1))
    return result


def examples(text: str) -> list[Block]:
    return [block for block in blocks(text) if block.is_example]


def load_solution_scaler() -> type:
    """``ToyLossScaler`` of ``solutions/loss_scaler.py``, imported under a private name."""
    spec = importlib.util.spec_from_file_location("_handout_solution_loss_scaler", ROOT / "solutions" / "loss_scaler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.ToyLossScaler


class TorchScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler("cpu")`` with the contract's one public name torch keeps private."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("cpu", *args, **kwargs)

    def get_growth_tracker(self) -> int:
        return self._get_growth_tracker()


#: The two scalers every example runs with.
SCALERS: dict[str, Callable[[], Callable[..., Any]]] = {
    "solution": load_solution_scaler,
    "torch": lambda: TorchScaler,
}


def run_example(block: Block, scaler: Callable[..., Any]) -> tuple[int, str]:
    """Run ``block``'s ``>>>`` examples with ``from loss_scaler import ToyLossScaler`` giving ``scaler``.

    Returns (number of failing examples, doctest's report of them).
    """
    fake = types.ModuleType("loss_scaler")
    fake.ToyLossScaler = scaler  # type: ignore[attr-defined]
    test = doctest.DocTestParser().get_doctest(block.text, {"torch": torch, "ToyLossScaler": scaler},
                                                block.label, None, block.line)
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=DOCTEST_FLAGS, verbose=False)
    saved = sys.modules.get("loss_scaler")
    sys.modules["loss_scaler"] = fake
    try:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            runner.run(test, out=report.append)
    finally:
        if saved is None:
            sys.modules.pop("loss_scaler", None)
        else:
            sys.modules["loss_scaler"] = saved
    return runner.failures, "".join(report)


def check_example(block: Block, name: str, scaler: Callable[..., Any]) -> None:
    """``block`` holds for the scaler called ``name``; a deviation block must fail for torch's scaler."""
    failures, report = run_example(block, scaler)
    if name == "torch" and block.is_deviation:
        assert failures, (f"{block.label} is marked as a deliberate deviation from torch, but torch.amp.GradScaler "
                          f"gives exactly the results shown: drop the mark and the 'deviation' wording")
    else:
        assert not failures, f"the example at {block.label} does not hold for the {name} scaler:\n{report}"


def numbers(text: str) -> list[str]:
    """Every number written in ``text`` (as written: ``2**16``, ``3.4e38``, ``1.100000023841858``)."""
    return re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", text)


# --------------------------------------------------------------------------- tables and sections


def section(text: str, prefix: str) -> str:
    """The text of the section whose heading starts with ``prefix`` (e.g. ``"### 7. "``), up to the next heading."""
    marks = headings(text)
    lines = text.splitlines()
    for position, (index, heading) in enumerate(marks):
        if heading.startswith(prefix):
            end = marks[position + 1][0] if position + 1 < len(marks) else len(lines)
            return "\n".join(lines[index:end])
    raise AssertionError(f"no section starts with {prefix!r}")


def first_table(text: str) -> list[list[str]]:
    """The body rows (cells stripped) of the first Markdown table in ``text``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def number_in(cell: str) -> float:
    return float(re.search(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", cell.replace("*", "")).group())


def _as_written(true: float, written: float) -> bool:
    """``written`` is ``true`` exactly or rounded to the two significant digits the table shows."""
    return written == true or written == float(f"{true:.2g}") or written == float(f"{true:.1e}")


def check_format_table(text: str, dtype: torch.dtype) -> None:
    """Section 3's table of float formats says what ``torch.finfo`` says about ``dtype``."""
    rows = {row[0].strip("`"): row for row in first_table(section(text, "### 3. "))}
    _, bits, largest, normal, subnormal, eps, digits = rows[str(dtype).removeprefix("torch.")]
    info = torch.finfo(dtype)
    mantissa = round(-math.log2(info.eps))
    assert [int(b) for b in bits.split("/")] == [1, info.bits - 1 - mantissa, mantissa], f"{dtype}: bits {bits}"
    for cell, true in ((largest, info.max), (normal, info.smallest_normal),
                       (subnormal, info.smallest_normal * info.eps), (eps, info.eps)):
        assert _as_written(true, number_in(cell)), f"{dtype}: the table says {cell}, torch.finfo says {true!r}"
    assert digits == f"~{math.floor((mantissa + 1) * math.log10(2))}", f"{dtype}: decimal digits {digits}"


#: The words of section 7's "step taken?" column, in every edition.
STEP_TAKEN = {"yes": True, "**skipped**": False, "실행": True, "**건너뜀**": False}


def check_worked_example(text: str, factory: Callable[..., Any], name: str) -> None:
    """Section 7's worked example, replayed: one float32 parameter, inf in the gradient where the table says so."""
    part = section(text, "### 7. ")
    init = float(re.search(r"`init_scale=(\d+)`", part).group(1))
    interval = int(re.search(r"`growth_interval=(\d+)`", part).group(1))
    scaler = factory(init_scale=init, growth_interval=interval)
    w = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([w], lr=1.0)
    for iteration, gradients, taken, tracker, scale in first_table(part[part.index("`growth_interval="):]):
        scaler.scale(torch.tensor(1.0))
        w.grad = torch.tensor([math.inf if "inf" in gradients else 1.0])
        before = w.detach().clone()
        scaler.step(opt)
        scaler.update()
        got = (not torch.equal(before, w.detach()), scaler.get_growth_tracker(), scaler.get_scale())
        want = (STEP_TAKEN[taken], int(tracker), number_in(scale))
        assert got == want, f"{name}: iteration {iteration} gives (step taken, tracker, S) = {got}, the table {want}"


#: Below this, the scaled run's loss is float32 rounding noise whose digits depend on the CPU's kernels.
TINY_LOSS = 1e-12


def check_demo_output(text: str) -> None:
    """Section 10's demo output is what ``underflow_demo.run_demo`` prints, and its prose numbers hold."""
    spec = importlib.util.spec_from_file_location("_handout_underflow_demo", ROOT / "solutions" / "underflow_demo.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = demo
    spec.loader.exec_module(demo)
    part = section(text, "### 10. ")
    [shown] = [block.text for block in blocks(part) if "loss, no scaler" in block.text]
    plain, scaled = demo.run_demo(200, use_scaler=False), demo.run_demo(200, use_scaler=True)
    for line in shown.splitlines()[2:]:
        step = int(line.split("|")[0])
        printed = (f"{step:>5} | {plain.losses[step]:>15.3e} | {scaled.losses[step]:>13.3e} | "
                   f"{scaled.scales[step]:>9.0f}")
        message = f"the handout shows\n{line}\nthe demo prints\n{printed}"
        shown_cells, printed_cells = [c.strip() for c in line.split("|")], [c.strip() for c in printed.split("|")]
        if float(printed_cells[2]) >= TINY_LOSS:
            assert line == printed, message
        else:  # float32 rounding noise, CPU-dependent: the handout says its last digits vary
            assert shown_cells[:2] + shown_cells[3:] == printed_cells[:2] + printed_cells[3:], message
            assert 0.5 < float(shown_cells[2]) / float(printed_cells[2]) < 2.0, message
    assert f"{plain.first_zero_grad_step}" in numbers(part.split(shown)[1]), "the step where the gradient hits 0"
    assert plain.final_loss / scaled.final_loss > 10_000  # "ends more than 10,000 times lower"
