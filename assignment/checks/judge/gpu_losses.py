"""The judge's side of 4.1: the losses it computes itself, on the CPU, from the weights a training run copied out.

Nothing here runs in a student process: the judge draws an evaluation batch of its own from a secret it never sends
(:func:`evaluation_batch`), decodes the weights a ``gpu_train`` reply carries (:func:`decode_weights`), and measures
their loss (:func:`evaluation_loss`) and how far they lie from the float32 run's (:func:`distance_from_training`).
The model and the task they are built from are the student process's own (:mod:`checks.runners.gpu_runs`).
"""

from __future__ import annotations

import base64
import json
import math

import torch

from checks.runners.gpu_runs import EVAL_ROWS, build_model, teacher
from checks.runners.harness import Json

_EVAL_CACHE: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}


def _model_key(cfg: dict[str, Json], secret: int) -> str:
    return json.dumps({**{k: cfg[k] for k in ("width", "depth", "d_out", "teacher_width", "seed")}, "secret": secret},
                      sort_keys=True)


def evaluation_batch(cfg: dict[str, Json], secret: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The judge's own evaluation batch, on the CPU: :data:`EVAL_ROWS` fresh inputs drawn from ``secret`` (the judge
    draws it with :mod:`secrets` after the runs, and never sends it), and the teacher's targets for ``cfg``'s seed.

    Why a secret and not the seed: the student's process holds the seed (it builds the training data from it), so a
    batch drawn from the seed is one it can fit its weights to.  The inputs follow the task's distribution, so a
    model's loss on them is an estimate of its loss on the task, whatever the draw: 4.1 compares the AMP and the
    float32 weights on the same batch, with a margin (10 %) far above the draw's noise (~1 % at 1024 rows).
    """
    key = _model_key(cfg, secret)
    if key not in _EVAL_CACHE:
        a, b, _ = teacher(cfg)
        x = torch.randn(EVAL_ROWS, int(cfg["width"]), generator=torch.Generator().manual_seed(int(secret)))
        _EVAL_CACHE.clear()  # one run at a time: each timed run has its own seed
        _EVAL_CACHE[key] = (x, torch.tanh(x @ a) @ b)
    return _EVAL_CACHE[key]


def distance_from_training(cfg: dict[str, Json], weights: list[torch.Tensor], fp32: list[torch.Tensor]) -> float:
    """How far ``weights`` lie from the float32 run's weights on the same seed, as a fraction of how far training
    moved those from the initial weights (the judge's check that the weights come from training on the task's
    batches: an AMP run from the same start on the same batches stays close, weights written another way do not)."""
    start = torch.cat([w.reshape(-1) for w in initial_weights(cfg)])
    ours, theirs = (torch.cat([w.reshape(-1) for w in ws]).double() for ws in (weights, fp32))
    moved = float((theirs - start.double()).norm())
    return float((ours - theirs).norm()) / moved if moved > 0 else math.inf


def decode_weights(cfg: dict[str, Json], copied: Json) -> "list[torch.Tensor] | str":
    """The parameters a ``gpu_train`` reply copied out, as CPU float32 tensors; or why they cannot be used."""
    if isinstance(copied, str):
        return f"the model's parameters could not be copied out ({copied[:200]})"
    shapes = [p.shape for p in build_model({**cfg, "device": "cpu"}).parameters()]
    if not (isinstance(copied, list) and len(copied) == len(shapes) and all(isinstance(c, str) for c in copied)):
        return "the copied-out parameters do not match the model's"
    out = []
    for text, shape in zip(copied, shapes):
        try:
            raw = base64.b64decode(text.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            return "the copied-out parameters are not readable"
        if len(raw) != 4 * math.prod(shape):
            return "the copied-out parameters do not match the model's"
        out.append(torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(shape))
    return out


def initial_weights(cfg: dict[str, Json]) -> list[torch.Tensor]:
    """The model's parameters as ``cfg``'s seed initialises them, on the CPU."""
    return [param.detach() for param in build_model({**cfg, "device": "cpu"}).parameters()]


def evaluation_loss(cfg: dict[str, Json], secret: int, weights: "list[torch.Tensor] | None" = None) -> float:
    """The float32 mean squared error on the judge's evaluation batch (drawn from ``secret``) of the model with
    ``weights`` (None: the model as the seed initialises it), computed on the CPU in the judge."""
    model = build_model({**cfg, "device": "cpu"})
    if weights is not None:
        with torch.no_grad():
            for param, value in zip(model.parameters(), weights):
                param.copy_(value)
    x, y = evaluation_batch(cfg, secret)
    with torch.no_grad():
        return float(torch.nn.functional.mse_loss(model(x), y))
