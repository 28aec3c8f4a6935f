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


def numbers(text: str) -> list[str]:
    """Every number written in ``text`` (as written: ``2**16``, ``3.4e38``, ``1.100000023841858``)."""
    return re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", text)
