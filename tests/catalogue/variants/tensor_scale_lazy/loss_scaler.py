"""Correct variant: the scale is a 0-dim float32 tensor created lazily, per-optimizer state
is a dataclass, inf/NaN are accumulated in a tensor and grads are unscaled with
``torch._foreach_mul_``.  Written in a style different from the reference on purpose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch


def _finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class _OptimizerState:
    unscaled: bool = False
    stepped: bool = False
    found_inf: torch.Tensor = field(default_factory=lambda: torch.zeros((), dtype=torch.float32))


class ToyLossScaler:
    def __init__(self, init_scale: float = 65536.0, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000) -> None:
        if not (_finite_number(init_scale) and init_scale > 0):
            raise ValueError("init_scale: expected a positive finite number")
        if init_scale > torch.finfo(torch.float32).max or torch.tensor(float(init_scale)).item() == 0.0:
            raise ValueError("init_scale: not representable as a positive float32")
        if not (_finite_number(growth_factor) and growth_factor > 1):
            raise ValueError("growth_factor: expected a finite number above 1")
        if not (_finite_number(backoff_factor) and 0 < backoff_factor < 1):
            raise ValueError("backoff_factor: expected a number in (0, 1)")
        if type(growth_interval) is not int or growth_interval <= 0:
            raise ValueError("growth_interval: expected a positive int")
        self._init_scale = float(init_scale)
        self._scale_tensor: torch.Tensor | None = None  # created on first use
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._tracker = 0
        self._states: dict[int, _OptimizerState] = {}

    # ----------------------------------------------------------------- helpers

    @staticmethod
    def _to_float32(value: float) -> torch.Tensor:
        return torch.tensor(value, dtype=torch.float64).to(torch.float32)

    def _scale(self) -> torch.Tensor:
        if self._scale_tensor is None:
            self._scale_tensor = self._to_float32(self._init_scale)
        return self._scale_tensor

    def _opt_state(self, optimizer: torch.optim.Optimizer) -> _OptimizerState:
        key = id(optimizer)
        if key not in self._states:
            self._states[key] = _OptimizerState()
        return self._states[key]

    @staticmethod
    def _grads(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
        out = []
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    out.append(p.grad)
        return out

    # ----------------------------------------------------------------- API

    def scale(self, outputs: Any) -> Any:
        if isinstance(outputs, torch.Tensor):
            return outputs * self._scale().to(outputs.device)
        if isinstance(outputs, list):
            return [self.scale(o) for o in outputs]
        if isinstance(outputs, tuple):
            return tuple(self.scale(o) for o in outputs)
        raise ValueError(f"cannot scale a {type(outputs).__name__}")

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        state = self._opt_state(optimizer)
        if state.stepped:
            raise RuntimeError("too late: step() already ran for this optimizer in this iteration")
        if state.unscaled:
            raise RuntimeError("this optimizer's gradients are already unscaled")
        grads = self._grads(optimizer)
        for g in grads:
            if g.dtype == torch.float16:
                raise ValueError("float16 gradients: keep the model in float32 and use autocast")
        found = torch.zeros((), dtype=torch.float32)
        for g in grads:
            found += (~torch.isfinite(g)).any().to(torch.float32)
        if grads:
            inv = self._scale().double().reciprocal().float()
            torch._foreach_mul_(grads, inv.to(grads[0].device))
        state.found_inf = found
        state.unscaled = True

    def step(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("closure") is not None:
            raise RuntimeError("closures are not supported")
        state = self._opt_state(optimizer)
        if state.stepped:
            raise RuntimeError("step() twice for one optimizer in one iteration")
        if not state.unscaled:
            self.unscale_(optimizer)
        state.stepped = True
        if state.found_inf.item() > 0:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: float | torch.Tensor | None = None) -> None:
        if new_scale is not None:
            value = new_scale.item() if isinstance(new_scale, torch.Tensor) else float(new_scale)
            wide = torch.tensor(value, dtype=torch.float64)
            if bool(wide.isfinite()) and bool(wide.abs() > torch.finfo(torch.float32).max):
                raise RuntimeError(f"new_scale {value} overflows float32")
            self._scale_tensor = wide.to(torch.float32)
        else:
            if len(self._states) == 0:
                raise RuntimeError("update() needs an unscale_() or step() first")
            total_inf = torch.stack([s.found_inf for s in self._states.values()]).sum()
            scale = self._scale()
            if total_inf.item() > 0:
                self._scale_tensor = (scale.double() * self._backoff_factor).float()
                self._tracker = 0
            else:
                self._tracker += 1
                if self._tracker == self._growth_interval:
                    self._tracker = 0
                    grown = (scale.double() * self._growth_factor).float()
                    if bool(torch.isfinite(grown)):
                        self._scale_tensor = grown
        self._states.clear()

    def get_scale(self) -> float:
        return float(self._scale().item())

    def get_growth_tracker(self) -> int:
        return self._tracker

    def state_dict(self) -> dict[str, Any]:
        return dict(scale=self.get_scale(), growth_factor=self._growth_factor,
                    backoff_factor=self._backoff_factor, growth_interval=self._growth_interval,
                    _growth_tracker=self._tracker)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if len(state_dict) == 0:
            raise RuntimeError("empty state dict")
        self._scale_tensor = self._to_float32(float(state_dict["scale"]))
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._tracker = int(state_dict["_growth_tracker"])
