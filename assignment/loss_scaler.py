"""Task 1: a toy dynamic loss scaler that behaves exactly like ``torch.amp.GradScaler``.

Why a loss scaler?  Under float16 autocast, gradients smaller than about 3e-8 round
to zero and larger than 65504 overflow to inf.  Multiplying the loss by a large
*scale* S before ``backward()`` multiplies every gradient by S as well, lifting the
small ones out of the underflow zone.  Before the optimizer uses them, the
gradients are divided by S again ("unscaled").  If S was too large, some gradient
overflows to inf/NaN: that step is skipped and S shrinks ("backoff").  After
``growth_interval`` clean steps in a row, S grows again.

The typical iteration (one optimizer)::

    scaler = ToyLossScaler()
    optimizer.zero_grad()
    with torch.autocast(device_type="cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)          # unscales, then steps unless a grad is inf/NaN
    scaler.update()                 # backoff or growth, once per iteration

Contract (checked by the autograder, exception *types* only, not messages):

* The scale is held as a float32 value.  Every product that changes it is
  computed in float64 and rounded to float32, exactly as torch's kernel does.
* ``unscale_`` may be called at most once per optimizer per iteration, and not
  after ``step`` (``RuntimeError``); ``step`` at most once per optimizer per
  iteration (``RuntimeError``); ``update`` needs at least one ``unscale_``/``step``
  since the last ``update`` unless ``new_scale`` is given (``RuntimeError``).
* Write it yourself: where this file runs, ``torch.amp.GradScaler`` (every alias) and
  torch's private AMP kernels are not there (a stand-in and kernels that raise).
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Any

import torch

_FLOAT32_MAX = 3.4028234663852886e38


def _round_to_float32(value: float) -> float:
    """Return ``value`` rounded to the nearest float32, as a Python float."""
    raise NotImplementedError("_round_to_float32 is not implemented yet: see Task 1 in README.md")


def _to_float32_scale(value: float) -> float:
    """``value`` rounded to float32; RuntimeError if it is finite but beyond float32's range (its magnitude above
    3.4028234663852886e38), as torch."""
    raise NotImplementedError("_to_float32_scale is not implemented yet: see Task 1 in README.md")


class _Stage(Enum):
    """Where one optimizer is in the current iteration."""

    READY = "ready"
    UNSCALED = "unscaled"
    STEPPED = "stepped"


class ToyLossScaler:
    """A dynamic loss scaler with the semantics of ``torch.amp.GradScaler(enabled=True)``.

    Args:
        init_scale: the first scale S; must be positive and finite.
        growth_factor: S is multiplied by this after ``growth_interval`` clean
            iterations in a row; must be > 1.
        backoff_factor: S is multiplied by this after an iteration whose gradients
            held inf or NaN; must lie strictly between 0 and 1.
        growth_interval: how many clean iterations in a row trigger growth; a
            positive integer.

    Raises:
        ValueError: for any argument outside the ranges above.
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
    ) -> None:
        raise NotImplementedError("ToyLossScaler.__init__ is not implemented yet: see Task 1 in README.md")

    def _state(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """Return (creating if needed) this iteration's state for ``optimizer``."""
        raise NotImplementedError("ToyLossScaler._state is not implemented yet: see Task 1 in README.md")

    def scale(self, outputs: Any) -> Any:
        """Multiply ``outputs`` by the current scale.

        Args:
            outputs: a tensor, or a list/tuple (possibly nested) of tensors.

        Returns:
            The scaled value(s), in a container of the same type.  The scale is
            applied as a 0-dim float32 tensor on the output's device, with torch's
            type promotion: a 0-dim float16 loss comes back as float32 (so a loss
            above 1.0 does not overflow float16's maximum of 65504), while a float16
            tensor with dimensions stays float16.

        Raises:
            ValueError: if ``outputs`` is neither a tensor nor a list/tuple of them.
        """
        raise NotImplementedError("ToyLossScaler.scale is not implemented yet: see Task 1 in README.md")

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place, and look for inf/NaN.

        Every existing ``.grad`` of the optimizer's parameters is multiplied by the
        float32 reciprocal of the scale (computed in float64, then rounded).
        Parameters whose ``.grad`` is None are skipped.  inf/NaN is looked for in the
        gradients as they are *before* the multiplication (the scaled values), as
        torch does.  Call it explicitly only when you need the true gradients before
        ``step`` (e.g. for clipping).

        Raises:
            ValueError: if a gradient is float16 (parameters must stay float32).  Nothing
                changes then: the gradients stay as they were and the call does not
                count as this iteration's ``unscale_``.
            RuntimeError: if called twice for ``optimizer`` in one iteration, or
                after ``step(optimizer)``.
        """
        raise NotImplementedError("ToyLossScaler.unscale_ is not implemented yet: see Task 1 in README.md")

    def step(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        """Unscale (unless already done) and step ``optimizer`` if no grad is inf/NaN.

        Args:
            optimizer: the optimizer to step.
            *args, **kwargs: forwarded to ``optimizer.step``.

        Returns:
            What ``optimizer.step(*args, **kwargs)`` returned, or None when the
            step was skipped because of inf/NaN gradients.

        Raises:
            RuntimeError: if called twice for ``optimizer`` in one iteration.

        An optimizer none of whose parameters has a gradient is outside the contract
        (torch raises AssertionError there); the grader never steps one.
        """
        raise NotImplementedError("ToyLossScaler.step is not implemented yet: see Task 1 in README.md")

    def update(self, new_scale: float | torch.Tensor | None = None) -> None:
        """Adjust the scale at the end of an iteration and reset per-optimizer state.

        Without ``new_scale``: if any optimizer seen since the last update found
        inf/NaN, ``scale *= backoff_factor`` and the growth tracker resets to 0
        (once, however many gradients overflowed).  Otherwise the tracker counts
        one more clean iteration; when it equals (``==``) ``growth_interval`` it resets to
        0 and ``scale *= growth_factor`` unless that would overflow float32.

        Args:
            new_scale: a Python float or a one-element tensor; if given, the scale is set
                to it (rounded to float32) and the growth tracker is left alone.

        Raises:
            RuntimeError: if no ``unscale_``/``step`` happened since the last
                update and ``new_scale`` is None, or if ``new_scale`` is finite but
                beyond float32's range (its magnitude above 3.4028234663852886e38), as torch.
        """
        raise NotImplementedError("ToyLossScaler.update is not implemented yet: see Task 1 in README.md")

    def get_scale(self) -> float:
        """Return the current scale as a Python float."""
        raise NotImplementedError("ToyLossScaler.get_scale is not implemented yet: see Task 1 in README.md")

    def get_growth_tracker(self) -> int:
        """Return how many clean iterations in a row have been counted towards growth."""
        raise NotImplementedError("ToyLossScaler.get_growth_tracker is not implemented yet: see Task 1 in README.md")

    def state_dict(self) -> dict[str, Any]:
        """Return the scaler's state with torch's keys.

        Returns:
            ``{"scale", "growth_factor", "backoff_factor", "growth_interval",
            "_growth_tracker"}`` as Python numbers.
        """
        raise NotImplementedError("ToyLossScaler.state_dict is not implemented yet: see Task 1 in README.md")

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the state produced by :meth:`state_dict` (this or torch's GradScaler).

        Raises:
            RuntimeError: if ``state_dict`` is empty, or its scale is finite but beyond
                float32's range (its magnitude above 3.4028234663852886e38), as torch.
        """
        raise NotImplementedError("ToyLossScaler.load_state_dict is not implemented yet: see Task 1 in README.md")
