"""Cheat: subclasses torch's scaler instead of implementing one (where loss_scaler.py runs the class is a stand-in that refuses subclassing)."""
from __future__ import annotations

import math

import torch


class ToyLossScaler(torch.amp.GradScaler):
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        if not (isinstance(init_scale, (int, float)) and math.isfinite(init_scale) and init_scale > 0):
            raise ValueError("init_scale")
        if not (growth_factor > 1.0):
            raise ValueError("growth_factor")
        if not (0.0 < backoff_factor < 1.0):
            raise ValueError("backoff_factor")
        if not (isinstance(growth_interval, int) and growth_interval > 0):
            raise ValueError("growth_interval")
        super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval)
        self._lazy_init_scale_growth_tracker(torch.device("cpu"))

    def unscale_(self, optimizer):
        if any(p.grad is not None and p.grad.dtype == torch.float16
               for g in optimizer.param_groups for p in g["params"]):
            raise ValueError("float16 grads")
        return super().unscale_(optimizer)

    def update(self, new_scale=None):
        if new_scale is None and not self._per_optimizer_states:
            raise RuntimeError("update() without step()")
        return super().update(new_scale)

    def get_growth_tracker(self):
        return self._get_growth_tracker()
