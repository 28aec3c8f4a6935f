"""Plain-data copy-out: what leaves a student process is read by these functions, never by a method of the object.

A tensor counts only if its type is exactly torch.Tensor (or, for the harness's own parameters, exactly
torch.nn.Parameter), so a subclass with ``__torch_function__`` (or a class assigned through ``__class__``) cannot
choose the values it reports.  The torch functions used are bound here, when the runners are imported and before
any student code runs, and run with torch-function overrides and dispatch modes disabled.

This module imports nothing but torch and the standard library (the runners, :mod:`checks.runners.harness` and
:mod:`checks.runners.ops`, read tensors through it).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch._ops import _len_torch_dispatch_stack_pre_dispatch
from torch.utils._python_dispatch import _disable_current_modes, _len_torch_dispatch_stack

Json = Any

_TOLIST = torch.Tensor.tolist
_RESHAPE = torch.Tensor.reshape
_DETACH = torch.Tensor.detach
_TO = torch.Tensor.to
_NUMEL = torch.Tensor.numel
_REQUIRES_GRAD = torch._C.TensorBase.requires_grad.__get__
_GRAD = torch._C.TensorBase.grad.__get__
_DTYPE = torch._C.TensorBase.dtype.__get__
_NO_TORCH_FUNCTION = torch._C.DisableTorchFunction
PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


class NotPlainData(Exception):
    """A value the harness copies out is not of the exact type it must have (a tensor subclass, say)."""


class PlainReads:
    """Reads with no override in effect: ``__torch_function__`` disabled and, if any dispatch mode is
    active, every mode popped (torch's own ``_disable_current_modes``) until the block ends.

    Checking the two mode stacks first is what makes it cheap: a scenario reads tensors thousands of
    times, and nearly always no mode is active.
    """

    __slots__ = ("_function", "_modes")

    def __enter__(self) -> None:
        self._function = _NO_TORCH_FUNCTION()
        self._function.__enter__()
        self._modes = None
        if _len_torch_dispatch_stack() or _len_torch_dispatch_stack_pre_dispatch():  # modes __torch_dispatch__ uses
            self._modes = _disable_current_modes()
            self._modes.__enter__()

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._modes is not None:
                self._modes.__exit__(*exc)
        finally:
            self._function.__exit__(*exc)


def is_plain_tensor(value: Any) -> bool:
    """Whether ``value``'s type is exactly ``torch.Tensor`` or ``torch.nn.Parameter`` (no subclass)."""
    return type(value) in PLAIN_TENSOR_TYPES


def tensor_values(tensor: torch.Tensor) -> list[float]:
    """The values of ``tensor``, flattened, as Python floats; raises NotPlainData for any other type."""
    return tensors_values([tensor])[0]


def tensors_values(tensors: Sequence[torch.Tensor]) -> list[list[float]]:
    """:func:`tensor_values` of each tensor, read under one guard against overrides (a scenario reads thousands)."""
    for tensor in tensors:
        if not is_plain_tensor(tensor):
            raise NotPlainData(f"a {type(tensor).__name__[:80]} where the harness expects a plain torch.Tensor")
    with PlainReads():
        return [_floats(_RESHAPE(_DETACH(tensor), (-1,))) for tensor in tensors]


def _floats(flat: torch.Tensor) -> list[float]:
    """A flat plain tensor's values as Python floats (any floating dtype converts to them exactly)."""
    return _TOLIST(flat if _DTYPE(flat).is_floating_point else _TO(flat, torch.float64))


def tensor_facts(tensor: torch.Tensor) -> dict[str, Json]:
    """dtype, requires_grad and numel of a plain tensor (see :func:`tensor_values`)."""
    if not is_plain_tensor(tensor):
        raise NotPlainData(f"a {type(tensor).__name__[:80]} where the harness expects a plain torch.Tensor")
    with PlainReads():
        return {"dtype": str(_DTYPE(tensor)).replace("torch.", ""), "requires_grad": bool(_REQUIRES_GRAD(tensor)),
                "numel": int(_NUMEL(tensor))}


def param_grad(param: torch.nn.Parameter) -> torch.Tensor | None:
    """``param.grad`` read through torch's own descriptor (no override of ``grad`` applies)."""
    return _GRAD(param)
