"""The handout's claims that have a result are executed: a wrong example fails here.

Both editions, ``assignment/README.md`` and the Korean ``README.ko.md`` (kept in step with it by
``tests/test_handout_sync.py``), are executed the same way:

* every ``pycon`` example block holds for the reference solution
  and for ``torch.amp.GradScaler("cpu")``; a block marked ``deviation`` holds for the solution
  and fails for torch (the deviation it documents is real);
* no ``>>>`` line lives outside such a block (so none escapes these tests);
* the table of float formats matches ``torch.finfo``;
* the worked example of section 7 is what the solution and torch's scaler do, row by row;
* the demo output of section 10 is what ``underflow_demo.run_demo`` prints.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch

import handout_examples as hx

TEXT = hx.HANDOUT.read_text(encoding="utf-8")
EXAMPLES = hx.examples(TEXT)
EDITIONS = {"en": TEXT, "ko": hx.KOREAN_HANDOUT.read_text(encoding="utf-8")}


def _example_params() -> list[Any]:
    return [pytest.param(block, id=f"{language}-line{block.line}")
            for language, text in EDITIONS.items() for block in hx.examples(text)]


@pytest.fixture(scope="module", params=sorted(hx.SCALERS))
def scaler(request: pytest.FixtureRequest) -> tuple[str, Callable[..., Any]]:
    return request.param, hx.SCALERS[request.param]()


def test_the_handout_has_examples_of_every_task_1_method() -> None:
    task1 = "\n".join(block.text for block in EXAMPLES if block.section.startswith("### Task 1"))
    for call in ("ToyLossScaler(", ".scale(", ".unscale_(", ".step(", ".update(", ".update(new_scale=",
                 ".get_scale()", ".get_growth_tracker()", ".state_dict()", ".load_state_dict("):
        assert call in task1, f"no Task 1 example calls {call}"


@pytest.mark.parametrize("language", sorted(EDITIONS))
def test_no_example_lives_outside_a_pycon_block(language: str) -> None:
    text = EDITIONS[language]
    inside = sum(block.text.count(">>> ") for block in hx.examples(text))
    assert inside == text.count(">>> "), "a `>>>` line outside a ```pycon block would never be executed"


@pytest.mark.parametrize("block", _example_params())
def test_example_holds(block: hx.Block, scaler: tuple[str, Callable[..., Any]]) -> None:
    hx.check_example(block, *scaler)


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


@pytest.mark.parametrize("language", sorted(EDITIONS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_float_format_table_matches_finfo(dtype: torch.dtype, language: str) -> None:
    hx.check_format_table(EDITIONS[language], dtype)


@pytest.mark.parametrize("language", sorted(EDITIONS))
def test_worked_example_of_the_update_rule(scaler: tuple[str, Callable[..., Any]], language: str) -> None:
    name, factory = scaler
    hx.check_worked_example(EDITIONS[language], factory, name)


def test_demo_output_in_section_10_is_what_the_demo_prints() -> None:
    hx.check_demo_output(TEXT)


@pytest.mark.parametrize("where", ["assignment/README.md", "assignment/README.ko.md",
                                   "autograder/packaging/notebook_build.py", "autograder/packaging/notebook_ko.py"])
def test_setup_line_installs_the_graders_pins_and_cpu_torch(where: str) -> None:
    """Students install what the grader runs (hypothesis's examples depend on its version), torch from the CPU index."""
    import re
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    pins = dict(re.match(r"([a-z-]+)==([0-9.]+)", line).groups()  # type: ignore[union-attr]
                for line in tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
                if re.match(r"(torch|pytest|hypothesis)==", line))
    assert set(pins) == {"torch", "pytest", "hypothesis"}
    if where.endswith(".py"):  # a notebook edition's introduction
        import importlib

        text = importlib.import_module(where[:-3].replace("/", ".")).INTRO
    else:
        text = (root / where).read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if "pip install" in line]
    for name, version in pins.items():
        assert any(f"{name}=={version}" in line for line in lines), (name, version, lines)
        assert not re.search(rf"pip install[^`\n]*\b{name}\b(?!==)", text), f"{name} unpinned in {where}"
    assert any("torch==" in line and "--index-url https://download.pytorch.org/whl/cpu" in line for line in lines)
