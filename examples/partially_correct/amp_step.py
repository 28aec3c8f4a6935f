"""Example amp_step with a classic mistake: backward() runs inside the autocast block."""

import torch


def amp_step(model, inputs, targets, loss_fn, optimizer, scaler, *, device_type="cuda",
             dtype=torch.float16, max_grad_norm=None):
    optimizer.zero_grad()
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
        scaler.scale(loss).backward()  # bug: should be outside autocast
    if max_grad_norm is not None:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()
