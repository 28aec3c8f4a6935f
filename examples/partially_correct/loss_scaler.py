"""An example submission that is partly right: the scaler works on clean and +inf runs
but never notices NaN (it only calls isinf) and grows the scale even when that
overflows float32.  `make grade` shows how those bugs cost points."""

import torch


class ToyLossScaler:
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        if not (0 < init_scale < float("inf")):
            raise ValueError("init_scale must be positive and finite")
        if growth_factor <= 1:
            raise ValueError("growth_factor must be > 1")
        if not 0 < backoff_factor < 1:
            raise ValueError("backoff_factor must be in (0, 1)")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) or growth_interval <= 0:
            raise ValueError("growth_interval must be a positive integer")
        self.scale_value = torch.tensor(float(init_scale), dtype=torch.float32)
        if not 0 < float(self.scale_value) or float(init_scale) > torch.finfo(torch.float32).max:
            raise ValueError("init_scale must be a positive float32 value")
        self.growth_factor, self.backoff_factor = growth_factor, backoff_factor
        self.growth_interval, self.tracker = growth_interval, 0
        self.states = {}

    def scale(self, outputs):
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if not isinstance(outputs, torch.Tensor):
            raise ValueError("outputs must be a tensor or a list/tuple of tensors")
        return outputs * self.scale_value.to(outputs.device)

    def unscale_(self, optimizer):
        state = self.states.setdefault(id(optimizer), {"stage": "ready", "inf": False})
        if state["stage"] != "ready":
            raise RuntimeError("unscale_ called twice or after step")
        inv = self.scale_value.double().reciprocal().float()
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        if any(g.dtype == torch.float16 for g in grads):
            raise ValueError("float16 gradients")
        for grad in grads:
            state["inf"] = state["inf"] or bool(torch.isinf(grad).any())  # bug: NaN slips through
            grad.mul_(inv.to(grad.device))
        state["stage"] = "unscaled"

    def step(self, optimizer, *args, **kwargs):
        state = self.states.setdefault(id(optimizer), {"stage": "ready", "inf": False})
        if state["stage"] == "stepped":
            raise RuntimeError("step called twice")
        if state["stage"] == "ready":
            self.unscale_(optimizer)
        result = None if state["inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = "stepped"
        return result

    def update(self, new_scale=None):
        if new_scale is not None:
            value = float(new_scale)
            if value != value * 2 and abs(value) > torch.finfo(torch.float32).max:  # finite, beyond float32
                raise RuntimeError("new_scale overflows float32")
            self.scale_value = torch.tensor(value, dtype=torch.float32)
        elif not self.states:
            raise RuntimeError("update without step")
        elif any(s["inf"] for s in self.states.values()):
            self.scale_value = (self.scale_value.double() * self.backoff_factor).float()
            self.tracker = 0
        else:
            self.tracker += 1
            if self.tracker == self.growth_interval:
                self.scale_value = (self.scale_value.double() * self.growth_factor).float()  # bug: may become inf
                self.tracker = 0
        self.states = {}

    def get_scale(self):
        return float(self.scale_value)

    def get_growth_tracker(self):
        return self.tracker

    def state_dict(self):
        return {"scale": self.get_scale(), "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "_growth_tracker": self.tracker}

    def load_state_dict(self, state):
        self.scale_value = torch.tensor(float(state["scale"]), dtype=torch.float32)
        self.growth_factor, self.backoff_factor = state["growth_factor"], state["backoff_factor"]
        self.growth_interval, self.tracker = state["growth_interval"], state["_growth_tracker"]
