"""ToyLossScaler written from the handout's contract alone (assignment/README.md, Task 1).

Another style: float32 rounding through struct (the handout's rules allow struct, not ctypes), per-optimizer bookkeeping in two small
dicts of strings and flags, inf/NaN found with one torch.stack, unscaling with a Python
float, errors raised from small helper checks.
"""

import math
import struct

import torch

F32_MAX = 3.4028234663852886e38


def f32(x):
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:  # beyond float32's range: inf, as a float32 cast gives
        return math.copysign(math.inf, x)


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class ToyLossScaler:
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        if not _number(init_scale) or not (0 < init_scale <= F32_MAX) or f32(init_scale) == 0.0:
            raise ValueError("init_scale: need a positive float32-representable number")
        if not _number(growth_factor) or not (1 < growth_factor < math.inf):
            raise ValueError("growth_factor: need a finite number above 1")
        if not _number(backoff_factor) or not (0 < backoff_factor < 1):
            raise ValueError("backoff_factor: need a number strictly between 0 and 1")
        if type(growth_interval) is not int or growth_interval <= 0:
            raise ValueError("growth_interval: need a positive int")
        self.s = f32(init_scale)
        self.g, self.b, self.n = float(growth_factor), float(backoff_factor), growth_interval
        self.t = 0
        self.where = {}  # id(optimizer) -> "unscaled" | "stepped"
        self.bad = {}  # id(optimizer) -> found inf/NaN

    def _scale_one(self, x):
        if isinstance(x, torch.Tensor):
            return x * torch.full((), self.s, dtype=torch.float32, device=x.device)
        if isinstance(x, list):
            return [self._scale_one(v) for v in x]
        if isinstance(x, tuple):
            return tuple(self._scale_one(v) for v in x)
        raise ValueError("scale() takes a tensor or a list/tuple of tensors")

    def scale(self, outputs):
        return self._scale_one(outputs)

    def unscale_(self, optimizer):
        where = self.where.get(id(optimizer))
        if where == "unscaled":
            raise RuntimeError("unscale_ twice in one iteration")
        if where == "stepped":
            raise RuntimeError("unscale_ after step")
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        for grad in grads:
            if grad.dtype == torch.float16:
                raise ValueError("float16 gradients cannot be unscaled")
        flags = torch.stack([(~torch.isfinite(grad)).any() for grad in grads]) if grads else torch.zeros(0)
        self.bad[id(optimizer)] = bool(flags.any())
        inverse = f32(1.0 / self.s)
        for grad in grads:
            grad.mul_(inverse)
        self.where[id(optimizer)] = "unscaled"

    def step(self, optimizer, *args, **kwargs):
        if "closure" in kwargs:
            raise RuntimeError("closures are not supported")
        if self.where.get(id(optimizer)) == "stepped":
            raise RuntimeError("step twice in one iteration")
        if self.where.get(id(optimizer)) is None:
            self.unscale_(optimizer)
        self.where[id(optimizer)] = "stepped"
        if self.bad[id(optimizer)]:
            return None
        return optimizer.step(*args, **kwargs)

    def _set(self, value):
        value = float(value)
        if math.isfinite(value) and abs(value) > F32_MAX:
            raise RuntimeError("scale does not fit in float32")
        self.s = f32(value)

    def update(self, new_scale=None):
        if new_scale is not None:
            self._set(new_scale)
        elif not self.where:
            raise RuntimeError("update() without unscale_/step")
        elif any(self.bad.values()):
            self.s = f32(self.s * self.b)
            self.t = 0
        else:
            self.t += 1
            if self.t == self.n:
                self.t = 0
                grown = f32(self.s * self.g)
                if grown != math.inf:
                    self.s = grown
        self.where, self.bad = {}, {}

    def get_scale(self):
        return self.s

    def get_growth_tracker(self):
        return self.t

    def state_dict(self):
        return dict(scale=self.s, growth_factor=self.g, backoff_factor=self.b, growth_interval=self.n,
                    _growth_tracker=self.t)

    def load_state_dict(self, state):
        if not state:
            raise RuntimeError("empty state dict")
        self._set(state["scale"])
        self.g, self.b = float(state["growth_factor"]), float(state["backoff_factor"])
        self.n, self.t = int(state["growth_interval"]), int(state["_growth_tracker"])
