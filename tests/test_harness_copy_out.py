"""The student process's hot path: copying tensors out, and the harness's optimizer step.

Both run around nearly every operation of a grading (about 17,000 per submission), so they were made
cheaper; these tests pin down that the cheaper paths observe exactly what the plain ones did:

* a dense one-dimensional tensor is read without ``reshape(-1)``; anything else is flattened first,
  so it reads, or fails with the same message, as through ``reshape``;
* the optimizer step hooks (torch's public registration API) run once per step, in torch's order,
  without torch's profiler label around them.

The byte-identical grades before and after were checked by grading solutions/, assignment/ and
catalogue bugs (see docs/speed.md); the plan's calls can be replayed with benchmarks/replay_calls.py.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from checks.runners import harness, optimizers, plain, probes  # conftest puts assignment/ on sys.path


@pytest.mark.parametrize(("make", "expected"), [
    (lambda: torch.tensor([1.5, -2.0, 0.25]), [1.5, -2.0, 0.25]),
    (lambda: torch.tensor([65504.0, 2.0 ** -24], dtype=torch.float16), [65504.0, 2.0 ** -24]),
    (lambda: torch.tensor([1.0 + 2.0 ** -7], dtype=torch.bfloat16), [1.0 + 2.0 ** -7]),
    (lambda: torch.tensor(3.0), [3.0]),  # a scalar: flattened to one value
    (lambda: torch.tensor([[1.0, 2.0], [3.0, 4.0]]), [1.0, 2.0, 3.0, 4.0]),  # a matrix: flattened, row by row
    (lambda: torch.tensor([[1.0, 2.0], [3.0, 4.0]]).t(), [1.0, 3.0, 2.0, 4.0]),  # non-contiguous matrix
    (lambda: torch.arange(6.0)[::2], [0.0, 2.0, 4.0]),  # a strided one-dimensional view: every other value
    (lambda: torch.tensor([7, -3]), [7.0, -3.0]),  # integers come out as floats
    (lambda: torch.tensor([True, False]), [1.0, 0.0]),
    (lambda: torch.nn.Parameter(torch.tensor([0.5, -0.0])), [0.5, -0.0]),  # requires grad; the sign of zero kept
    (lambda: torch.tensor([math.inf, -math.inf]), [math.inf, -math.inf]),
])
def test_values_are_the_tensors_own_flattened(make: Any, expected: list[float]) -> None:
    values = harness.tensor_values(make())
    assert values == expected
    assert all(type(v) is float for v in values)
    assert [math.copysign(1.0, v) for v in values] == [math.copysign(1.0, v) for v in expected]


def test_nan_reads_as_nan() -> None:
    (value,) = harness.tensor_values(torch.tensor([math.nan]))
    assert math.isnan(value)


def test_a_sparse_tensor_fails_as_reshape_fails() -> None:
    """A one-dimensional tensor of another layout is flattened first, so its failure is reshape's, as before."""
    with pytest.raises(RuntimeError, match="reshape is not implemented for sparse tensors"):
        harness.tensor_values(torch.tensor([1.0, 0.0, 2.0]).to_sparse())


def test_a_subclass_is_refused_before_anything_is_read() -> None:
    class Other(torch.Tensor):
        pass

    with pytest.raises(plain.NotPlainData, match="a Other where the harness expects a plain torch.Tensor"):
        harness.tensors_values([torch.ones(2), torch.ones(2).as_subclass(Other)])


def test_one_dimensional_reads_make_no_reshape(monkeypatch: pytest.MonkeyPatch) -> None:
    """What makes the read cheap, counted: a scenario over one-dimensional parameters flattens nothing."""
    calls: list[tuple[int, ...]] = []
    reshape = plain._RESHAPE

    def counted(tensor: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        calls.append(tuple(tensor.shape))
        return reshape(tensor, shape)

    monkeypatch.setattr(plain, "_RESHAPE", counted)
    args = {"world": {"optimizers": [{"groups": [[2, 3]]}]}, "ops": [
        {"op": "new", "kwargs": {"init_scale": 4.0}},
        {"op": "grads", "opt": 0, "values": [[1.0, 2.0], [3.0, 4.0, 5.0]]},
        {"op": "unscale_", "opt": 0}, {"op": "step", "opt": 0}, {"op": "update"},
        {"op": "params", "opt": 0}, {"op": "grads_of", "opt": 0}, {"op": "observe"},
    ]}
    results = harness.run_scaler_ops(args, harness.torch_scaler)
    assert "error" not in str(results)
    assert results[2]["ok"] == {"in_place": True, "grads": [[0.25, 0.5], [0.75, 1.0, 1.25]]}
    assert results[3]["ok"] == {"called": True, "returned": 1001.0}
    assert results[6]["ok"] == [[0.25, 0.5], [0.75, 1.0, 1.25]]
    assert results[7]["ok"] == {"scale": 4.0, "tracker": 1}
    assert calls == []
    harness.tensor_values(torch.ones(2, 2))  # the control: a matrix is flattened through the counter
    assert calls == [(2, 2)]


# --------------------------------------------------------------------------- the optimizer's step hooks


def _optimizer(kind: type) -> torch.optim.Optimizer:
    param = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    param.grad = torch.tensor([10.0, 20.0])
    return kind([param], lr=0.1)


@pytest.mark.parametrize("kind", [optimizers.PlainSGD, optimizers.RecordingSGD, probes._LoggingSGD])
def test_step_hooks_run_once_per_step_in_torchs_order(kind: type) -> None:
    optimizer = _optimizer(kind)
    order: list[str] = []
    handles = [
        register_optimizer_step_pre_hook(lambda opt, args, kwargs: order.append("global pre")),
        optimizer.register_step_pre_hook(lambda opt, args, kwargs: order.append("own pre")),
        optimizer.register_step_post_hook(lambda opt, args, kwargs: order.append("own post")),
        register_optimizer_step_post_hook(lambda opt, args, kwargs: order.append("global post")),
    ]
    try:
        optimizer.step()
        optimizer.step()
    finally:
        for handle in handles:
            handle.remove()
    assert order == ["global pre", "own pre", "own post", "global post"] * 2
    (param,) = optimizer.param_groups[0]["params"]
    assert param.detach().tolist() == pytest.approx([1.0 - 2 * 1.0, 2.0 - 2 * 2.0])  # two steps of lr 0.1


def test_a_pre_hook_may_replace_the_arguments_and_must_return_a_pair() -> None:
    optimizer = _optimizer(optimizers.RecordingSGD)
    closure_calls: list[int] = []

    def with_closure(opt: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return args, {"closure": lambda: closure_calls.append(1) or 7.0}

    handle = optimizer.register_step_pre_hook(with_closure)
    try:
        assert optimizer.step() == 1001.0  # the recording token; the closure ran
    finally:
        handle.remove()
    assert closure_calls == [1]
    handle = optimizer.register_step_pre_hook(lambda opt, args, kwargs: "neither None nor a pair")
    try:
        with pytest.raises(RuntimeError, match="must return None or a tuple of"):
            optimizer.step()
    finally:
        handle.remove()


def test_a_step_has_no_profiler_label() -> None:
    """torch's own wrapper puts ``record_function("Optimizer.step#...")`` around every step; ours does not."""
    optimizer = _optimizer(optimizers.RecordingSGD)
    with torch.autograd.profiler.profile() as profile:
        optimizer.step()
    names = [event.name for event in profile.function_events]
    assert names == ["aten::add_"]  # the update itself, and nothing else
    assert type(optimizer).step.hooked is True  # torch's _patch_step_function left it as it is
