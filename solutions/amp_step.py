"""Task 2: one automatic-mixed-precision (AMP) training iteration.

``amp_step`` runs the five moves of an AMP iteration in the one order that is
correct:

1. zero the gradients (so they do not accumulate across iterations);
2. forward pass *and* loss under ``torch.autocast`` (autocast picks float16/bfloat16
   for matmuls and keeps reductions such as losses in float32);
3. ``scaler.scale(loss).backward()`` *outside* autocast (backward ops follow the
   dtypes chosen in the forward pass by themselves);
4. optionally ``scaler.unscale_(optimizer)`` then gradient clipping, so the clip
   threshold applies to the true gradients, not the scaled ones;
5. ``scaler.step(optimizer)`` (skips the update if a gradient is inf/NaN), then
   ``scaler.update()`` once.

It must work with your ``ToyLossScaler`` and with ``torch.amp.GradScaler``.
"""

from __future__ import annotations

from typing import Any, Callable

import torch


def amp_step(
    model: torch.nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    scaler: Any,
    *,
    device_type: str = "cuda",
    dtype: torch.dtype = torch.float16,
    max_grad_norm: float | None = None,
) -> torch.Tensor:
    """Run one AMP training iteration and return the loss.

    Args:
        model: the network; its parameters stay float32 (never call ``.half()``).
        inputs: a batch of inputs, already on the right device.
        targets: the matching targets.
        loss_fn: ``loss_fn(outputs, targets)`` returns a scalar loss tensor.
        optimizer: the optimizer holding ``model``'s parameters.
        scaler: a ``ToyLossScaler`` or a ``torch.amp.GradScaler``.
        device_type: passed to ``torch.autocast`` ("cuda" or "cpu").
        dtype: the autocast dtype (``torch.float16`` or ``torch.bfloat16``).
        max_grad_norm: if given, clip the *unscaled* gradients' total norm to it.

    Returns:
        The unscaled loss of this iteration, detached from the graph.
    """
    # BEGIN SOLUTION
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device_type, dtype=dtype):
        outputs = model(inputs)
        loss = loss_fn(outputs, targets)
    scaler.scale(loss).backward()
    if max_grad_norm is not None:
        scaler.unscale_(optimizer)
        params = [param for group in optimizer.param_groups for param in group["params"]]
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()
    # END SOLUTION
