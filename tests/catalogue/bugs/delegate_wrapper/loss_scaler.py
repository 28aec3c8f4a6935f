"""Cheat: wraps torch's scaler (composition) and forwards every call (where loss_scaler.py runs, torch's scaler is not there: it earns only its own argument checks)."""
from __future__ import annotations

import torch
from torch.amp import GradScaler as _Reference


class ToyLossScaler:
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        if not (init_scale > 0 and init_scale < float("inf")) or not growth_factor > 1 or not 0 < backoff_factor < 1:
            raise ValueError("bad arguments")
        if not isinstance(growth_interval, int) or growth_interval < 1:
            raise ValueError("bad growth_interval")
        self._inner = _Reference("cpu", init_scale=init_scale, growth_factor=growth_factor,
                                 backoff_factor=backoff_factor, growth_interval=growth_interval)
        self._inner._lazy_init_scale_growth_tracker(torch.device("cpu"))

    def scale(self, outputs):
        return self._inner.scale(outputs)

    def unscale_(self, optimizer):
        return self._inner.unscale_(optimizer)

    def step(self, optimizer, *args, **kwargs):
        return self._inner.step(optimizer, *args, **kwargs)

    def update(self, new_scale=None):
        return self._inner.update(new_scale)

    def get_scale(self):
        return self._inner.get_scale()

    def get_growth_tracker(self):
        return self._inner._get_growth_tracker()

    def state_dict(self):
        return self._inner.state_dict()

    def load_state_dict(self, state_dict):
        return self._inner.load_state_dict(state_dict)
