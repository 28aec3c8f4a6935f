"""Correct variant in a plain style: no type hints, boolean flags instead of an Enum,
float32 rounding through ``struct``, ``mul_`` by the reciprocal rounded through it, a growth counter that is
incremented before it is compared, helper methods and different error messages.
"""
import math
import struct

import torch


def to_f32(x):
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:  # struct refuses values that round past float32's maximum
        return math.copysign(math.inf, x)


class ToyLossScaler:
    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        if not isinstance(init_scale, (int, float)) or not (0 < init_scale < math.inf):
            raise ValueError("bad init_scale")
        if not isinstance(growth_factor, (int, float)) or not (1 < growth_factor < math.inf):
            raise ValueError("bad growth_factor")
        if not isinstance(backoff_factor, (int, float)) or not (0 < backoff_factor < 1):
            raise ValueError("bad backoff_factor")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) or growth_interval < 1:
            raise ValueError("bad growth_interval")
        self.s = to_f32(float(init_scale))
        if self.s == 0 or init_scale > 3.4028234663852886e38:
            raise ValueError("init_scale is not a positive float32")
        self.gf = float(growth_factor)
        self.bf = float(backoff_factor)
        self.gi = growth_interval
        self.count = 0
        self.opt = {}

    def _get(self, optimizer):
        key = id(optimizer)
        if key not in self.opt:
            self.opt[key] = {"unscaled": False, "stepped": False, "inf": False}
        return self.opt[key]

    def _params_with_grad(self, optimizer):
        return [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]

    def _has_inf_or_nan(self, t):
        return bool(torch.isinf(t).any()) or bool(torch.isnan(t).any())

    def scale(self, outputs):
        if isinstance(outputs, torch.Tensor):
            return torch.mul(outputs, torch.as_tensor(self.s, dtype=torch.float32, device=outputs.device))
        if isinstance(outputs, tuple):
            return tuple(map(self.scale, outputs))
        if isinstance(outputs, list):
            return list(map(self.scale, outputs))
        raise ValueError("expected a tensor or a list/tuple of tensors")

    def unscale_(self, optimizer):
        st = self._get(optimizer)
        if st["stepped"]:
            raise RuntimeError("unscale_ after step")
        if st["unscaled"]:
            raise RuntimeError("unscale_ called twice")
        params = self._params_with_grad(optimizer)
        if any(p.grad.dtype == torch.float16 for p in params):
            raise ValueError("fp16 grads")
        inf = False
        for p in params:
            if self._has_inf_or_nan(p.grad):
                inf = True
        inv = to_f32(1.0 / self.s)
        for p in params:
            p.grad.mul_(inv)
        st["inf"] = inf
        st["unscaled"] = True

    def step(self, optimizer, *args, **kwargs):
        if "closure" in kwargs:
            raise RuntimeError("no closures")
        st = self._get(optimizer)
        if st["stepped"]:
            raise RuntimeError("step twice")
        if not st["unscaled"]:
            self.unscale_(optimizer)
        st["stepped"] = True
        if st["inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def _grow_or_backoff(self, found_inf):
        if found_inf:
            self.s = to_f32(self.s * self.bf)
            self.count = 0
            return
        self.count += 1
        if self.count == self.gi:
            self.count = 0
            bigger = to_f32(self.s * self.gf)
            if bigger != math.inf:
                self.s = bigger

    def update(self, new_scale=None):
        if new_scale is None:
            if not self.opt:
                raise RuntimeError("nothing to update")
            self._grow_or_backoff(any(st["inf"] for st in self.opt.values()))
        else:
            v = float(new_scale)
            if -math.inf < v < -3.4028234663852886e38 or 3.4028234663852886e38 < v < math.inf:
                raise RuntimeError("new_scale is out of float32's range")
            self.s = to_f32(v)
        self.opt.clear()

    def get_scale(self):
        return self.s

    def get_growth_tracker(self):
        return self.count

    def state_dict(self):
        return {"scale": self.s, "growth_factor": self.gf, "backoff_factor": self.bf,
                "growth_interval": self.gi, "_growth_tracker": self.count}

    def load_state_dict(self, state_dict):
        if not state_dict:
            raise RuntimeError("empty")
        self.s = to_f32(float(state_dict["scale"]))
        self.gf = float(state_dict["growth_factor"])
        self.bf = float(state_dict["backoff_factor"])
        self.gi = int(state_dict["growth_interval"])
        self.count = int(state_dict["_growth_tracker"])
