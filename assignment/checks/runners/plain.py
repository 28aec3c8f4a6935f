"""Plain-data copy-out: what leaves a student process is read by these functions, never by a method of the object.

A tensor counts only if its type is exactly torch.Tensor (or, for the harness's own parameters, exactly
torch.nn.Parameter), so a subclass with ``__torch_function__`` (or a class assigned through ``__class__``) cannot
choose the values it reports.  The torch functions used are bound here, when the runners are imported and before
any student code runs, and run with torch-function overrides and dispatch modes disabled.

This module imports nothing but torch and the standard library (the runners, :mod:`checks.runners.harness` and
:mod:`checks.runners.ops`, read tensors through it).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch._ops import _len_torch_dispatch_stack_pre_dispatch
from torch.utils._python_dispatch import _disable_current_modes, _len_torch_dispatch_stack

Json = Any

_TOLIST = torch.Tensor.tolist
_RESHAPE = torch.Tensor.reshape
_DETACH = torch.Tensor.detach
_TO = torch.Tensor.to
_NUMEL = torch.Tensor.numel
_DIM = torch.Tensor.dim
_LAYOUT = torch._C.TensorBase.layout.__get__
_REQUIRES_GRAD = torch._C.TensorBase.requires_grad.__get__
_GRAD = torch._C.TensorBase.grad.__get__
_DTYPE = torch._C.TensorBase.dtype.__get__
_NO_TORCH_FUNCTION = torch._C.DisableTorchFunction
_STRIDED = torch.strided
PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


class NotPlainData(Exception):
    """A value the harness copies out is not of the exact type it must have (a tensor subclass, say)."""


def read_plainly(read: Callable[..., Any], *args: Any) -> Any:
    """``read(*args)`` with no override in effect: ``__torch_function__`` disabled and, if any dispatch
    mode is active, every mode popped (torch's own ``_disable_current_modes``) until it returns.

    Checking the two mode stacks first is what makes it cheap: a scenario reads tensors thousands of
    times, and nearly always no mode is active.  (A plain function with ``with`` blocks, not a context
    manager class: the copy-out runs around every operation, and a Python-level ``__enter__`` and
    ``__exit__`` cost more than the reads.)
    """
    with _NO_TORCH_FUNCTION():
        if _len_torch_dispatch_stack() or _len_torch_dispatch_stack_pre_dispatch():  # modes __torch_dispatch__ uses
            with _disable_current_modes():
                return read(*args)
        return read(*args)


def is_plain_tensor(value: Any) -> bool:
    """Whether ``value``'s type is exactly ``torch.Tensor`` or ``torch.nn.Parameter`` (no subclass)."""
    return type(value) in PLAIN_TENSOR_TYPES


def tensor_values(tensor: torch.Tensor) -> list[float]:
    """The values of ``tensor``, flattened, as Python floats; raises NotPlainData for any other type."""
    return tensors_values([tensor])[0]


def tensors_values(tensors: Sequence[torch.Tensor]) -> list[list[float]]:
    """:func:`tensor_values` of each tensor, read under one guard against overrides (a scenario reads thousands)."""
    for tensor in tensors:
        if type(tensor) not in PLAIN_TENSOR_TYPES:  # is_plain_tensor, inlined: this loop runs around every op
            raise NotPlainData(f"a {type(tensor).__name__[:80]} where the harness expects a plain torch.Tensor")
    return read_plainly(_all_floats, tensors)


def _all_floats(tensors: Sequence[torch.Tensor]) -> list[list[float]]:
    return [_floats(_DETACH(tensor)) for tensor in tensors]


def _floats(tensor: torch.Tensor) -> list[float]:
    """A plain tensor's values, flattened, as Python floats (any floating dtype converts to them exactly).

    A dense one-dimensional tensor is read as it is: ``reshape(-1)`` would only make an alias with the
    same sizes and strides (and cost more than the read); anything else (a scalar, a matrix, a sparse
    layout) is flattened first, so each fails or reads exactly as through ``reshape``.
    """
    flat = tensor if _DIM(tensor) == 1 and _LAYOUT(tensor) is _STRIDED else _RESHAPE(tensor, (-1,))
    return _TOLIST(flat if _DTYPE(flat).is_floating_point else _TO(flat, torch.float64))


def tensor_facts(tensor: torch.Tensor) -> dict[str, Json]:
    """dtype, requires_grad and numel of a plain tensor (see :func:`tensor_values`)."""
    if not is_plain_tensor(tensor):
        raise NotPlainData(f"a {type(tensor).__name__[:80]} where the harness expects a plain torch.Tensor")
    return read_plainly(lambda: {"dtype": str(_DTYPE(tensor)).replace("torch.", ""),
                                 "requires_grad": bool(_REQUIRES_GRAD(tensor)), "numel": int(_NUMEL(tensor))})


def param_grad(param: torch.nn.Parameter) -> torch.Tensor | None:
    """``param.grad`` read through torch's own descriptor (no override of ``grad`` applies)."""
    return _GRAD(param)
