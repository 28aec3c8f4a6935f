"""The handout's claims that have a result are executed: a wrong example fails here.

* every ``pycon`` example block of ``assignment/README.md`` holds for the reference solution
  and for ``torch.amp.GradScaler("cpu")``; a block marked ``deviation`` holds for the solution
  and fails for torch (the deviation it documents is real);
* no ``>>>`` line lives outside such a block (so none escapes these tests);
* the table of float formats matches ``torch.finfo``;
* the worked example of section 7 is what the solution and torch's scaler do, row by row;
* the demo output of section 10 is what ``underflow_demo.run_demo`` prints.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

import pytest
import torch

import handout_examples as hx

TEXT = hx.HANDOUT.read_text(encoding="utf-8")
EXAMPLES = hx.examples(TEXT)


def _example_params() -> list[Any]:
    return [pytest.param(block, id=f"line{block.line}") for block in EXAMPLES]


@pytest.fixture(scope="module", params=sorted(hx.SCALERS))
def scaler(request: pytest.FixtureRequest) -> tuple[str, Callable[..., Any]]:
    return request.param, hx.SCALERS[request.param]()


def test_the_handout_has_examples_of_every_task_1_method() -> None:
    task1 = "\n".join(block.text for block in EXAMPLES if block.section.startswith("### Task 1"))
    for call in ("ToyLossScaler(", ".scale(", ".unscale_(", ".step(", ".update(", ".update(new_scale=",
                 ".get_scale()", ".get_growth_tracker()", ".state_dict()", ".load_state_dict("):
        assert call in task1, f"no Task 1 example calls {call}"


def test_no_example_lives_outside_a_pycon_block() -> None:
    inside = sum(block.text.count(">>> ") for block in EXAMPLES)
    assert inside == TEXT.count(">>> "), "a `>>>` line outside a ```pycon block would never be executed"


@pytest.mark.parametrize("block", _example_params())
def test_example_holds(block: hx.Block, scaler: tuple[str, Callable[..., Any]]) -> None:
    name, factory = scaler
    failures, report = hx.run_example(block, factory)
    if name == "torch" and block.is_deviation:
        assert failures, (f"{block.label} is marked as a deliberate deviation from torch, but torch.amp.GradScaler "
                          f"gives exactly the results shown: drop the mark and the 'deviation' wording")
    else:
        assert not failures, f"the example at {block.label} does not hold for the {name} scaler:\n{report}"


def test_a_wrong_result_fails_the_check() -> None:
    """The examples' check can fail: the handout's old, wrong claim about float16 overflow is caught."""
    [block] = [b for b in EXAMPLES if "[60000., 1.]" in b.text]
    wrong = hx.Block(block.section, block.info, block.text.replace("tensor([inf, inf]", "tensor([inf, 65536.]"),
                     block.line)
    assert wrong.text != block.text
    for name in hx.SCALERS:
        failures, report = hx.run_example(wrong, hx.SCALERS[name]())
        assert failures == 1 and "65536." in report, name


# --------------------------------------------------------------------------- tables


def _table(text: str, first_header: str) -> list[list[str]]:
    """The body rows of the Markdown table whose header starts with ``| first_header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header}"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _number(cell: str) -> float:
    return float(re.search(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", cell.replace("*", "")).group())


def _as_written(true: float, written: float) -> bool:
    """``written`` is ``true`` exactly or rounded to the two significant digits the table shows."""
    return written == true or written == float(f"{true:.2g}") or written == float(f"{true:.1e}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_float_format_table_matches_finfo(dtype: torch.dtype) -> None:
    rows = {row[0].strip("`"): row for row in _table(TEXT, "format")}
    _, bits, largest, normal, subnormal, eps, digits = rows[str(dtype).removeprefix("torch.")]
    info = torch.finfo(dtype)
    mantissa = round(-math.log2(info.eps))
    assert [int(b) for b in bits.split("/")] == [1, info.bits - 1 - mantissa, mantissa]
    for cell, true in ((largest, info.max), (normal, info.smallest_normal), (subnormal, info.smallest_normal * info.eps),
                       (eps, info.eps)):
        assert _as_written(true, _number(cell)), f"{dtype}: the table says {cell}, torch.finfo says {true!r}"
    assert digits == f"~{math.floor((mantissa + 1) * math.log10(2))}"


def test_worked_example_of_the_update_rule(scaler: tuple[str, Callable[..., Any]]) -> None:
    """Section 7's table, replayed: one float32 parameter, inf in the gradient where the table says so."""
    name, factory = scaler
    section = TEXT[TEXT.index("### 7. "):TEXT.index("### 8. ")]
    init = float(re.search(r"`init_scale=(\d+)`", section).group(1))
    interval = int(re.search(r"`growth_interval=(\d+)`", section).group(1))
    s = factory(init_scale=init, growth_interval=interval)
    w = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([w], lr=1.0)
    for iteration, gradients, taken, tracker, scale in _table(section, "iteration"):
        s.scale(torch.tensor(1.0))
        w.grad = torch.tensor([math.inf if "inf" in gradients else 1.0])
        before = w.detach().clone()
        s.step(opt)
        s.update()
        got = (not torch.equal(before, w.detach()), s.get_growth_tracker(), s.get_scale())
        want = (taken == "yes", int(tracker), _number(scale))
        assert got == want, f"{name}: iteration {iteration} gives (step taken, tracker, S) = {got}, the table {want}"


def test_demo_output_in_section_10_is_what_the_demo_prints() -> None:
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("_handout_underflow_demo", hx.ROOT / "solutions" / "underflow_demo.py")
    demo = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = demo
    spec.loader.exec_module(demo)
    section = TEXT[TEXT.index("### 10. "):TEXT.index("## Part II")]
    [shown] = [b.text for b in hx.blocks(section) if "loss, no scaler" in b.text]
    plain, scaled = demo.run_demo(200, use_scaler=False), demo.run_demo(200, use_scaler=True)
    for line in shown.splitlines()[2:]:
        step = int(line.split("|")[0])
        printed = (f"{step:>5} | {plain.losses[step]:>15.3e} | {scaled.losses[step]:>13.3e} | "
                   f"{scaled.scales[step]:>9.0f}")
        assert line == printed, f"the handout shows\n{line}\nthe demo prints\n{printed}"
    first_zero = int(re.search(r"From step (\d+) on", section).group(1))
    assert plain.first_zero_grad_step == first_zero
    assert plain.final_loss / scaled.final_loss > 10_000  # "ends more than 10,000 times lower"
