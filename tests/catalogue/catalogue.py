"""A catalogue of buggy and correct submissions, written as patches of the reference solution.

Every :class:`Entry` is a full submission: ``solutions/{loss_scaler,amp_step,answers}.py``
with textual patches applied (and, where a rewrite is clearer than a patch, whole files
taken from ``tests/catalogue/{bugs,variants}/<name>/``).  Each patch's old text must occur
exactly once in the file at the time it is applied, so the catalogue breaks loudly when
the reference solution changes instead of silently grading the wrong code.

A *bug* says which rubric rows must lose points (``must_fail``) and the range its total
must fall in (``band``); a *variant* is a correct rewrite that must get full marks.  An entry
with ``known_gap`` documents a grader gap reported to staff (its test is a strict xfail).
``tests/test_catalogue.py`` grades them all in one ``python -m autograder grade`` run.

To look at the submissions by hand::

    .venv/bin/python tests/catalogue/catalogue.py materialize /tmp/catalogue
    .venv/bin/python -m autograder grade /tmp/catalogue/* --out /tmp/catalogue-grades

Why one file: it is data, one entry per bug or variant, grouped by the behaviour they
break; a reader scans it as a table.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from autograder.engine import rubric

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SOLUTIONS = ROOT / "solutions"
CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")

S, A, Q = "loss_scaler.py", "amp_step.py", "answers.py"

#: Every Task-1 row: what a scaler that cannot be built loses.
TASK1 = frozenset(item.number for item in rubric.ITEMS if item.runs_student_scaler)
#: What a submission that loses every Task-1 row can still earn (Task 2 runs with torch's scaler, the Quick Check).
WITHOUT_TASK1 = rubric.max_points(tuple(item for item in rubric.ITEMS if item.number not in TASK1))
ROW_POINTS = {item.number: item.points for item in rubric.ITEMS}


@dataclass(frozen=True)
class Patch:
    file: str  # one of CONTRACT
    old: str  # must occur exactly once
    new: str


@dataclass(frozen=True)
class Entry:
    name: str
    description: str
    kind: str  # "bug" or "variant"
    patches: tuple[Patch, ...] = ()
    #: contract file -> path (relative to this folder) of a whole replacement file
    files: tuple[tuple[str, str], ...] = ()
    #: rubric numbers that must score below their maximum
    must_fail: frozenset[str] = frozenset()
    #: inclusive range of the total score (CPU part, out of rubric.max_points())
    band: tuple[float, float] = (0.0, 90.0)
    #: set when the grader is known not to catch this bug yet (the test xfails strictly)
    known_gap: str | None = None

    @property
    def folder_name(self) -> str:
        return f"{self.kind}-{self.name}"

    @property
    def touched(self) -> frozenset[str]:
        """The contract files this entry changes."""
        return frozenset({p.file for p in self.patches} | {f for f, _ in self.files})


def bug(name: str, description: str, *patches: Patch, fail: set[str] | frozenset[str], band: tuple[float, float],
        files: dict[str, str] | None = None, known_gap: str | None = None) -> Entry:
    return Entry(name, description, "bug", tuple(patches), tuple(sorted((files or {}).items())),
                 frozenset(fail), band, known_gap)


def variant(name: str, description: str, *patches: Patch, files: dict[str, str] | None = None,
            known_gap: str | None = None) -> Entry:
    return Entry(name, description, "variant", tuple(patches), tuple(sorted((files or {}).items())),
                 known_gap=known_gap)


def materialize(entry: Entry, dest: Path) -> Path:
    """Write ``entry``'s three contract files into ``dest`` (created); return ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    texts = {name: (SOLUTIONS / name).read_text(encoding="utf-8") for name in CONTRACT}
    for name, relative in entry.files:
        assert name in CONTRACT, f"{entry.name}: {name} is not a contract file"
        texts[name] = (HERE / relative).read_text(encoding="utf-8")
    for patch in entry.patches:
        assert patch.file in CONTRACT, f"{entry.name}: {patch.file} is not a contract file"
        count = texts[patch.file].count(patch.old)
        assert count == 1, (f"catalogue entry {entry.name!r}: the patch's old text occurs {count} times in "
                            f"{patch.file} (expected exactly once); did the solution change?\n{patch.old}")
        texts[patch.file] = texts[patch.file].replace(patch.old, patch.new)
    for name, text in texts.items():
        (dest / name).write_text(text, encoding="utf-8")
    return dest


# ============================================================================ bugs

# Reference lines that many patches touch.
UPDATE_BACKOFF = """\
            if any(state["found_inf"] for state in self._per_optimizer_states.values()):
                self._scale = _round_to_float32(self._scale * self._backoff_factor)
                self._growth_tracker = 0
"""
UPDATE_GROWTH = """\
            elif self._growth_tracker + 1 == self._growth_interval:
                grown = _round_to_float32(self._scale * self._growth_factor)
                if math.isfinite(grown):
                    self._scale = grown
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
"""
FOUND_INF_LINE = "            found_inf = found_inf or not bool(torch.isfinite(grad).all())\n"
UNSCALE_LOOP = """\
        found_inf = False
        for grad in grads:
            found_inf = found_inf or not bool(torch.isfinite(grad).all())
            grad.mul_(torch.tensor(inv_scale, dtype=torch.float32, device=grad.device))
"""
WITH_BLOCK = """\
    with torch.autocast(device_type=device_type, dtype=dtype):
        outputs = model(inputs)
        loss = loss_fn(outputs, targets)
"""
CLIP_BLOCK = """\
        scaler.unscale_(optimizer)
        params = [param for group in optimizer.param_groups for param in group["params"]]
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
"""

# Score bands.  Task 1 is 50 points, Task 2 30, Task 3 10 (90 in all).  A scaler-only bug keeps
# Tasks 2 and 3 (Task 2 runs amp_step with torch's scaler).  ``fail`` is the exact set of rows a bug
# loses, besides 1.11 (the differential row, which any Task-1 bug may fail on top).
FULL = 90.0

UPDATE_RULE_BUGS = [
    bug("growth_off_by_one",
        "Compares the tracker with growth_interval before counting this step: grows one clean step late.",
        Patch(S, "            elif self._growth_tracker + 1 == self._growth_interval:\n",
              "            elif self._growth_tracker == self._growth_interval:\n"),
        fail={"1.6"}, band=(70, 88)),
    bug("tracker_not_reset_on_backoff",
        "Backs off but keeps counting clean steps from where the tracker was.",
        Patch(S, UPDATE_BACKOFF, UPDATE_BACKOFF.replace("                self._growth_tracker = 0\n", "")),
        fail={"1.5"}, band=(70, 88)),
    bug("tracker_not_reset_after_growth",
        "Grows but never resets the tracker, so it grows again after every later clean step.",
        Patch(S, UPDATE_GROWTH, UPDATE_GROWTH.replace(
            "                    self._scale = grown\n                self._growth_tracker = 0\n",
            "                    self._scale = grown\n")),
        fail={"1.6"}, band=(70, 88)),
    bug("tracker_counts_skipped_steps",
        "Counts every update() towards growth, overflowing ones included (the tracker is never reset on backoff "
        "and may pass growth_interval).",
        Patch(S, UPDATE_BACKOFF + UPDATE_GROWTH, """\
            self._growth_tracker += 1
            if any(state["found_inf"] for state in self._per_optimizer_states.values()):
                self._scale = _round_to_float32(self._scale * self._backoff_factor)
            elif self._growth_tracker >= self._growth_interval:
                grown = _round_to_float32(self._scale * self._growth_factor)
                if math.isfinite(grown):
                    self._scale = grown
                self._growth_tracker = 0
"""),
        fail={"1.5", "1.6"}, band=(65, 85)),
    bug("backoff_divides",
        "Divides by backoff_factor instead of multiplying: the scale grows on overflow.",
        Patch(S, "_round_to_float32(self._scale * self._backoff_factor)",
              "_round_to_float32(self._scale / self._backoff_factor)"),
        fail={"1.5"}, band=(70, 85)),
    bug("growth_to_inf",
        "No finite guard: growth may overflow the scale to inf.",
        Patch(S, "                if math.isfinite(grown):\n                    self._scale = grown\n",
              "                self._scale = grown\n"),
        fail={"1.8"}, band=(85, 89)),
    bug("new_scale_resets_tracker",
        "update(new_scale) also resets the growth tracker.",
        Patch(S, "            self._scale = _to_float32_scale(float(new_scale))\n",
              "            self._scale = _to_float32_scale(float(new_scale))\n            self._growth_tracker = 0\n"),
        fail={"1.9"}, band=(85, 89)),
    bug("backoff_per_overflowing_grad",
        "Counts the overflowing gradients and backs off once per overflowing gradient.",
        Patch(S, UNSCALE_LOOP, UNSCALE_LOOP.replace("found_inf = False", "found_inf = 0").replace(
            FOUND_INF_LINE, "            found_inf += int(not bool(torch.isfinite(grad).all()))\n")),
        Patch(S, UPDATE_BACKOFF, """\
            overflows = sum(state["found_inf"] for state in self._per_optimizer_states.values())
            if overflows:
                for _ in range(overflows):
                    self._scale = _round_to_float32(self._scale * self._backoff_factor)
                self._growth_tracker = 0
"""),
        fail={"1.10"}, band=(75, 88)),
    bug("backoff_per_overflowing_optimizer",
        "Backs off once per optimizer that overflowed instead of once per update().",
        Patch(S, UPDATE_BACKOFF, """\
            overflowed = [state for state in self._per_optimizer_states.values() if state["found_inf"]]
            if overflowed:
                for _ in overflowed:
                    self._scale = _round_to_float32(self._scale * self._backoff_factor)
                self._growth_tracker = 0
"""),
        fail={"1.10"}, band=(75, 88)),
    bug("no_float32_rounding",
        "Keeps the scale as a float64 product (never rounded to float32), so growth never overflows either.",
        Patch(S, "_round_to_float32(self._scale * self._backoff_factor)", "self._scale * self._backoff_factor"),
        Patch(S, "_round_to_float32(self._scale * self._growth_factor)", "self._scale * self._growth_factor"),
        fail={"1.7", "1.8"}, band=(80, 88)),
    bug("new_scale_keeps_optimizer_state",
        "update(new_scale) returns early, before clearing the per-optimizer state: the next step() raises.",
        Patch(S, "            self._scale = _to_float32_scale(float(new_scale))\n",
              "            self._scale = _to_float32_scale(float(new_scale))\n            return\n"),
        fail={"1.9"}, band=(85, 89)),
    bug("init_scale_not_rounded",
        "Keeps init_scale as given (float64) instead of rounding it to float32.",
        Patch(S, "        self._scale = scale\n", "        self._scale = float(init_scale)\n"),
        fail={"1.7"}, band=(80, 89)),
    bug("wrong_default_interval",
        "Defaults growth_interval to 1000 instead of torch's 2000.",
        Patch(S, "        growth_interval: int = 2000,\n", "        growth_interval: int = 1000,\n"),
        fail={"1.18"}, band=(88, 89.5)),
]

DETECTION_BUGS = [
    bug("nan_ignored",
        "Looks for inf only (torch.isinf): NaN gradients are stepped on.",
        Patch(S, FOUND_INF_LINE, "            found_inf = found_inf or bool(torch.isinf(grad).any())\n"),
        fail={"1.12"}, band=(75, 89)),
    bug("only_last_grad_checked",
        "Overwrites found_inf in the loop, so only the last gradient counts.",
        Patch(S, FOUND_INF_LINE, "            found_inf = not bool(torch.isfinite(grad).all())\n"),
        fail={"1.12"}, band=(75, 89)),
    bug("only_first_grad_checked",
        "Checks only the first gradient for inf/NaN.",
        Patch(S, "        found_inf = False\n        for grad in grads:\n" + FOUND_INF_LINE,
              "        found_inf = bool(grads) and not bool(torch.isfinite(grads[0]).all())\n"
              "        for grad in grads:\n"),
        fail={"1.12"}, band=(75, 89)),
    bug("only_first_param_group",
        "Unscales and checks only optimizer.param_groups[0].",
        Patch(S, "            for group in optimizer.param_groups\n            for param in group[\"params\"]\n",
              "            for param in optimizer.param_groups[0][\"params\"]\n"),
        fail={"1.11"}, band=(75, 89)),
    bug("crash_on_none_grads",
        "Does not skip parameters whose .grad is None (AttributeError).",
        Patch(S, "            if param.grad is not None\n", ""),
        fail={"1.3"}, band=(70, 88)),
    bug("checks_inf_after_unscale",
        "Looks for inf/NaN after unscaling: a huge finite gradient times a reciprocal above 1 overflows and the "
        "step is wrongly skipped.",
        Patch(S, UNSCALE_LOOP, """\
        found_inf = False
        for grad in grads:
            grad.mul_(torch.tensor(inv_scale, dtype=torch.float32, device=grad.device))
            found_inf = found_inf or not bool(torch.isfinite(grad).all())
"""),
        fail={"1.12"}, band=(80, 89)),
    bug("inf_check_via_sum",
        "Detects inf/NaN through the sum of each gradient (as old apex did): finite gradients whose sum "
        "overflows float32 skip a step that torch takes.",
        Patch(S, FOUND_INF_LINE, "            found_inf = found_inf or not math.isfinite(float(grad.sum()))\n"),
        fail={"1.12"}, band=(80, 89)),
]

UNSCALE_STEP_BUGS = [
    bug("unscale_multiplies_by_scale",
        "Multiplies the gradients by the scale instead of its reciprocal.",
        Patch(S, "        inv_scale = _round_to_float32(1.0 / self._scale)\n", "        inv_scale = self._scale\n"),
        fail={"1.3"}, band=(70, 88)),
    bug("unscale_not_in_place",
        "Replaces each .grad with a new tensor instead of unscaling in place.",
        Patch(S, UNSCALE_LOOP, """\
        found_inf = False
        for group in optimizer.param_groups:
            for param in group["params"]:
                if param.grad is not None:
                    found_inf = found_inf or not bool(torch.isfinite(param.grad).all())
                    param.grad = param.grad * inv_scale
"""),
        fail={"1.3"}, band=(70, 88)),
    bug("step_unscales_twice",
        "step() unscales again even after an explicit unscale_() (gradients divided by the scale twice).",
        Patch(S, "        if state[\"stage\"] is _Stage.READY:\n            self.unscale_(optimizer)\n",
              "        state[\"stage\"] = _Stage.READY  # step always unscales\n        self.unscale_(optimizer)\n"),
        fail={"1.3"}, band=(70, 88)),
    bug("double_unscale_no_error",
        "A second unscale_() in the same iteration silently unscales again.",
        Patch(S, "        if stage is _Stage.UNSCALED:\n            raise RuntimeError(\"unscale_() has "
                 "already been called on this optimizer since the last update()\")\n", ""),
        fail={"1.13"}, band=(85, 89)),
    bug("update_without_step_no_error",
        "update() without any step()/unscale_() since the last update counts a clean step instead of raising.",
        Patch(S, "            if not self._per_optimizer_states:\n                raise RuntimeError(\"update() called "
                 "without any unscale_()/step() since the last update()\")\n", ""),
        fail={"1.13"}, band=(85, 89)),
    bug("step_returns_none",
        "step() steps but returns None instead of what optimizer.step() returned.",
        Patch(S, "        state[\"stage\"] = _Stage.STEPPED\n        return result\n",
              "        state[\"stage\"] = _Stage.STEPPED\n"),
        fail={"1.4"}, band=(75, 89)),
    bug("steps_on_inf",
        "step() calls optimizer.step() even when a gradient is inf/NaN.",
        Patch(S, "        result = None if state[\"found_inf\"] else optimizer.step(*args, **kwargs)\n",
              "        result = optimizer.step(*args, **kwargs)\n"),
        fail={"1.4"}, band=(75, 88)),
    bug("step_ignores_unscale_inf",
        "step() skips only when its own unscaling finds inf/NaN: after an explicit unscale_() (the clipping path) "
        "it steps on inf/NaN gradients (update() still backs off).",
        Patch(S, "        if state[\"stage\"] is _Stage.READY:\n            self.unscale_(optimizer)\n"
                 "        result = None if state[\"found_inf\"] else optimizer.step(*args, **kwargs)\n",
              "        found_inf = False  # what this step's own unscale_() finds\n"
              "        if state[\"stage\"] is _Stage.READY:\n            self.unscale_(optimizer)\n"
              "            found_inf = state[\"found_inf\"]\n"
              "        result = None if found_inf else optimizer.step(*args, **kwargs)\n"),
        fail={"1.4", "1.11"}, band=(70, 86)),
    bug("state_never_cleared",
        "update() never clears the per-optimizer state: the next iteration's step() raises.",
        Patch(S, "        self._per_optimizer_states = {}\n        # END SOLUTION\n", "        # END SOLUTION\n"),
        fail={"1.5", "1.6", "1.7", "1.8", "1.9", "1.13", "1.16"}, band=(50, 75)),
    bug("update_looks_at_last_optimizer",
        "update() looks only at the optimizer stepped last.",
        Patch(S, "            if any(state[\"found_inf\"] for state in self._per_optimizer_states.values()):\n",
              "            if list(self._per_optimizer_states.values())[-1][\"found_inf\"]:\n"),
        fail={"1.5"}, band=(70, 88)),
    bug("float16_grads_not_rejected",
        "unscale_() accepts float16 gradients.",
        Patch(S, "        if any(grad.dtype == torch.float16 for grad in grads):\n            raise ValueError("
                 "\"Attempting to unscale float16 gradients; keep parameters in float32\")\n", ""),
        fail={"1.14"}, band=(89, 89)),
]

SCALE_STATE_BUGS = [
    bug("scale_python_float",
        "scale() multiplies by the Python float: a float16 loss stays float16 and overflows above 65504/scale.",
        Patch(S, "            return outputs * torch.tensor(self._scale, dtype=torch.float32, device=outputs.device)\n",
              "            return outputs * self._scale\n"),
        fail={"1.2"}, band=(70, 88)),
    bug("scale_tuple_becomes_list",
        "scale() returns a list for a tuple.",
        Patch(S, "            return type(outputs)(self.scale(value) for value in outputs)\n",
              "            return [self.scale(value) for value in outputs]\n"),
        fail={"1.15"}, band=(85, 89.9)),
    bug("scale_not_nested",
        "scale() scales the items of a list or tuple but does not recurse: a tuple inside a list fails.",
        Patch(S, "            return type(outputs)(self.scale(value) for value in outputs)\n",
              "            return type(outputs)(value * torch.tensor(self._scale, dtype=torch.float32, "
              "device=value.device) for value in outputs)\n"),
        fail={"1.15"}, band=(85, 89.9)),
    bug("load_state_dict_drops_tracker",
        "load_state_dict() restores everything but the growth tracker.",
        Patch(S, "        self._growth_tracker = int(state_dict[\"_growth_tracker\"])\n", ""),
        fail={"1.16"}, band=(85, 89)),
    bug("state_dict_wrong_key",
        "state_dict() names the tracker 'growth_tracker' (torch's key is '_growth_tracker').",
        Patch(S, "            \"_growth_tracker\": self._growth_tracker,\n",
              "            \"growth_tracker\": self._growth_tracker,\n"),
        fail={"1.16"}, band=(85, 89)),
    bug("constructor_accepts_growth_factor_one",
        "The constructor accepts growth_factor == 1.",
        Patch(S, "growth_factor > 1.0 and", "growth_factor >= 1.0 and"),
        fail={"1.1"}, band=(85, 89.9)),
]

# Mistakes that only a sequence of calls shows, each at a state or scale no other row's inputs reach: the stateful
# differential search (row 1.11) charges them.
STATEFUL_BUGS = [
    bug("div_by_scale_tensor",
        "unscale_() divides the gradients by the scale instead of multiplying them by its float32 reciprocal: one "
        "rounding off where the scale is not a power of two.",
        Patch(S, "            grad.mul_(torch.tensor(inv_scale, dtype=torch.float32, device=grad.device))\n",
              "            grad.div_(torch.tensor(self._scale, dtype=torch.float32, device=grad.device))\n"),
        fail={"1.11"}, band=(80, 82)),
    bug("unscale_in_float64",
        "unscale_() multiplies the gradients by the float64 reciprocal and rounds the product, not by the "
        "reciprocal rounded to float32.",
        Patch(S, "            grad.mul_(torch.tensor(inv_scale, dtype=torch.float32, device=grad.device))\n",
              "            grad.copy_(grad.double() * (1.0 / self._scale))\n"),
        fail={"1.11"}, band=(80, 82)),
    bug("growth_at_or_above_interval",
        "update() grows once the tracker is at or above growth_interval (>=): a tracker restored above the interval "
        "grows at once instead of counting on.",
        Patch(S, "            elif self._growth_tracker + 1 == self._growth_interval:\n",
              "            elif self._growth_tracker + 1 >= self._growth_interval:\n"),
        fail={"1.11"}, band=(80, 86)),  # the public example's few sequences may miss it (then half the row)
    bug("load_state_dict_clamps_tracker",
        "load_state_dict() clamps a restored tracker below growth_interval.",
        Patch(S, "        self._growth_tracker = int(state_dict[\"_growth_tracker\"])\n",
              "        self._growth_tracker = min(int(state_dict[\"_growth_tracker\"]), self._growth_interval - 1)\n"),
        fail={"1.11"}, band=(80, 82)),
    bug("new_scale_tensor_ignored",
        "update(new_scale) sets the scale only for a Python float: a one-element tensor falls through to the "
        "usual backoff or growth.",
        Patch(S, "        if new_scale is not None:\n            self._scale = _to_float32_scale(float(new_scale))\n",
              "        if isinstance(new_scale, float):\n            self._scale = _to_float32_scale(float(new_scale))\n"),
        fail={"1.11"}, band=(80, 82)),
]

AMP_STEP_BUGS = [
    bug("backward_inside_autocast",
        "Calls backward() inside the autocast block.",
        Patch(A, "        loss = loss_fn(outputs, targets)\n    scaler.scale(loss).backward()\n",
              "        loss = loss_fn(outputs, targets)\n        scaler.scale(loss).backward()\n"),
        fail={"2.2"}, band=(85, 89)),
    bug("no_zero_grad",
        "Never zeroes the gradients: they accumulate across calls.",
        Patch(A, "    optimizer.zero_grad(set_to_none=True)\n", ""),
        fail={"2.4"}, band=(85, 89)),
    bug("zero_grad_after_backward",
        "Zeroes the gradients after backward() (the step sees no gradients).",
        Patch(A, "    optimizer.zero_grad(set_to_none=True)\n", ""),
        Patch(A, "    scaler.scale(loss).backward()\n",
              "    scaler.scale(loss).backward()\n    optimizer.zero_grad(set_to_none=True)\n"),
        fail={"2.4", "2.6", "2.7", "2.10"}, band=(75, 88)),
    bug("optimizer_step_direct",
        "Calls optimizer.step() instead of scaler.step(optimizer) (update() then raises).",
        Patch(A, "    scaler.step(optimizer)\n", "    optimizer.step()\n"),
        fail={"2.5", "2.6", "2.10"}, band=(78, 88)),
    bug("unscale_then_optimizer_step",
        "Unscales, then calls optimizer.step() directly: steps even when gradients overflowed.",
        Patch(A, "    if max_grad_norm is not None:\n" + CLIP_BLOCK + "    scaler.step(optimizer)\n",
              "    scaler.unscale_(optimizer)\n    if max_grad_norm is not None:\n"
              "        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)\n    optimizer.step()\n"),
        fail={"2.5", "2.6"}, band=(80, 88)),
    bug("update_before_step",
        "Calls scaler.update() before scaler.step(optimizer) (torch's scaler refuses it: every call ends there).",
        Patch(A, "    scaler.step(optimizer)\n    scaler.update()\n", "    scaler.update()\n    scaler.step(optimizer)\n"),
        fail={"2.5", "2.6", "2.10"}, band=(78, 86)),
    bug("no_update",
        "Never calls scaler.update() (the next step() raises).",
        Patch(A, "    scaler.update()\n", ""),
        fail={"2.6", "2.10"}, band=(80, 88)),
    bug("clip_before_unscale",
        "Clips the scaled gradients, then unscales.",
        Patch(A, CLIP_BLOCK, """\
        params = [param for group in optimizer.param_groups for param in group["params"]]
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        scaler.unscale_(optimizer)
"""),
        fail={"2.7"}, band=(85, 88)),
    bug("clip_without_unscale",
        "Clips without ever calling unscale_ (clips the scaled gradients).",
        Patch(A, CLIP_BLOCK, CLIP_BLOCK.replace("        scaler.unscale_(optimizer)\n", "")),
        fail={"2.7"}, band=(85, 88)),
    bug("model_half",
        "Calls model.half() instead of using autocast (float16 gradients cannot be unscaled).",
        Patch(A, WITH_BLOCK, """\
    model.half()
    outputs = model(inputs.half())
    loss = loss_fn(outputs.float(), targets)
"""),
        fail={"2.1", "2.5", "2.6", "2.7", "2.10"}, band=(70, 86)),
    bug("unscaled_backward",
        "Calls loss.backward() on the unscaled loss.",
        Patch(A, "    scaler.scale(loss).backward()\n", "    loss.backward()\n"),
        fail={"2.3", "2.10"}, band=(80, 88)),
    bug("no_autocast",
        "Runs forward and loss without autocast.",
        Patch(A, WITH_BLOCK, "    outputs = model(inputs)\n    loss = loss_fn(outputs, targets)\n"),
        fail={"2.1"}, band=(84, 87)),
    bug("hardcoded_cuda",
        "Hard-codes device_type=\"cuda\" (autocast is off on a CPU run).",
        Patch(A, "torch.autocast(device_type=device_type, dtype=dtype)", "torch.autocast(device_type=\"cuda\", dtype=dtype)"),
        fail={"2.1"}, band=(84, 87)),
    bug("hardcoded_dtype",
        "Hard-codes dtype=torch.float16 (ignores bfloat16).",
        Patch(A, "torch.autocast(device_type=device_type, dtype=dtype)",
              "torch.autocast(device_type=device_type, dtype=torch.float16)"),
        fail={"2.1"}, band=(85, 89)),
    bug("renamed_parameter",
        "Names the loss parameter `criterion` instead of the contract's `loss_fn` (keyword calls fail).",
        Patch(A, "    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],\n",
              "    criterion: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],\n"),
        Patch(A, "        loss = loss_fn(outputs, targets)\n", "        loss = criterion(outputs, targets)\n"),
        fail={"2.9"}, band=(87, 89)),
    bug("uses_gradscaler_internals",
        "Reads torch.amp.GradScaler's private _scale (fails with any other scaler of the contract).",
        Patch(A, "    scaler.scale(loss).backward()\n", "    (loss * scaler._scale).backward()\n"),
        fail={"2.9"}, band=(88, 89)),
    bug("returns_scaled_loss",
        "Returns the scaled loss.",
        Patch(A, "    scaler.scale(loss).backward()\n", "    loss = scaler.scale(loss)\n    loss.backward()\n"),
        fail={"2.8"}, band=(80, 88)),
    bug("returns_attached_loss",
        "Returns the loss still attached to the graph.",
        Patch(A, "    return loss.detach()\n", "    return loss\n"),
        fail={"2.8"}, band=(85, 88)),
    bug("returns_python_float",
        "Returns loss.item() instead of a tensor.",
        Patch(A, "    return loss.detach()\n", "    return loss.item()\n"),
        fail={"2.8"}, band=(85, 88)),
    # Cited: https://github.com/Haian-Jin/LVSM/pull/19 ("scaler.update() was only called when scaler.step() was also
    # called": a step skipped by the loop's own check skipped the update too) and
    # https://github.com/pytorch/pytorch/issues/67590 (users cannot tell whether scaler.step() skipped the step, so
    # they check the gradients themselves).
    bug("early_return_on_overflow",
        "Checks the gradients for inf/NaN itself and returns early when one overflowed, skipping scaler.step() and, "
        "with it, scaler.update(): the scale never backs off.",
        Patch(A, "    scaler.step(optimizer)\n    scaler.update()\n", """\
    grads = [param.grad for group in optimizer.param_groups for param in group["params"] if param.grad is not None]
    if not all(bool(torch.isfinite(grad).all()) for grad in grads):
        return loss.detach()  # overflow: skip this step
    scaler.step(optimizer)
    scaler.update()
"""),
        fail={"2.6"}, band=(85, 88)),
    # Cited: https://github.com/neosr-project/neosr/pull/9 ("fix double scale.update"); torch's scaler refuses the
    # second update() ("No inf checks were recorded prior to update.").
    bug("update_called_twice",
        "Calls scaler.update() twice after scaler.step(optimizer) (torch's scaler raises on the second one).",
        Patch(A, "    scaler.update()\n", "    scaler.update()\n    scaler.update()\n"),
        fail={"2.6"}, band=(86, 88)),
    bug("step_called_twice",
        "Calls scaler.step(optimizer) twice before scaler.update() (torch's scaler raises on the second one).",
        Patch(A, "    scaler.step(optimizer)\n", "    scaler.step(optimizer)\n    scaler.step(optimizer)\n"),
        fail={"2.5", "2.6", "2.10"}, band=(78, 86)),
    # The same loop, stepping always: a step the scaler skipped leaves it unupdated, so the next call's step is
    # refused ("step() has already been called since the last update()").
    bug("update_only_after_clean_step",
        "Calls scaler.step(optimizer) every time but scaler.update() only when the gradients were finite, to "
        "\"update after a clean step\".",
        Patch(A, "    scaler.update()\n", """\
    grads = [param.grad for group in optimizer.param_groups for param in group["params"] if param.grad is not None]
    if all(bool(torch.isfinite(grad).all()) for grad in grads):
        scaler.update()
"""),
        fail={"2.6"}, band=(85, 88)),
    # The "make sure the optimizer sees true gradients" habit: torch's scaler refuses the second unscale_ ("unscale_()
    # has already been called on this optimizer since the last update()"), the loop crashes at its first clipped step.
    bug("unscale_twice",
        "With max_grad_norm set, unscales before clipping and again before scaler.step(optimizer).",
        Patch(A, "    scaler.step(optimizer)\n", "    scaler.unscale_(optimizer)  # the optimizer must see true gradients\n"
              "    scaler.step(optimizer)\n"),
        fail={"2.7"}, band=(85, 88)),
    bug("unscale_after_step",
        "Unscales and clips after scaler.step(optimizer) (torch's scaler refuses: \"unscale_() is being called after "
        "step()\").",
        Patch(A, "    if max_grad_norm is not None:\n" + CLIP_BLOCK + "    scaler.step(optimizer)\n",
              "    scaler.step(optimizer)\n    if max_grad_norm is not None:\n" + CLIP_BLOCK),
        fail={"2.7"}, band=(85, 88)),
    # Cited: https://github.com/huggingface/transformers/issues/23905 and
    # https://github.com/huggingface/transformers/issues/24449 (unscale_ run before the later micro-batches'
    # backward: "unscale_() has already been called on this optimizer since the last update()").
    bug("unscale_before_backward",
        "With max_grad_norm set, calls scaler.unscale_(optimizer) right after zero_grad, before backward(): there "
        "are no gradients to unscale yet, so the gradients clipped afterwards are still scaled (torch's scaler "
        "then refuses step(): \"No inf checks were recorded for this optimizer.\").",
        Patch(A, "    optimizer.zero_grad(set_to_none=True)\n",
              "    optimizer.zero_grad(set_to_none=True)\n    if max_grad_norm is not None:\n"
              "        scaler.unscale_(optimizer)  # unscale early, to be safe\n"),
        Patch(A, CLIP_BLOCK, CLIP_BLOCK.replace("        scaler.unscale_(optimizer)\n", "")),
        fail={"2.7"}, band=(85, 88)),
]

#: Delegation to torch's scaler: torch's scaler and its kernels are not there where loss_scaler.py runs
#: (checks/student/absence.py), so each loses exactly the rows whose behaviour it left to them.
CHEATS = [
    bug("delegate_subclass", "Subclasses torch.amp.GradScaler.",
        files={S: "bugs/delegate_subclass/loss_scaler.py"}, fail=TASK1, band=(WITHOUT_TASK1, WITHOUT_TASK1)),
    bug("delegate_wrapper", "Wraps torch.amp.GradScaler (composition, imported under another name); validates "
        "the constructor's arguments itself.",
        files={S: "bugs/delegate_wrapper/loss_scaler.py"}, fail=TASK1,
        band=(WITHOUT_TASK1, WITHOUT_TASK1 + ROW_POINTS["1.1"])),  # its own argument checks may pass row 1.1's cases
    bug("delegate_kernels", "Calls torch's private AMP kernels to unscale (the rest is its own).",
        Patch(S, UNSCALE_LOOP, """\
        found = torch.zeros(1)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.full((1,), inv_scale))
        found_inf = bool(found.item())
"""),
        fail={f"1.{i}" for i in range(3, 14)} | {"1.16"}, band=(45, 50)),
    bug("delegate_obfuscated", "Reaches torch.amp.GradScaler through getattr with a computed name.",
        files={S: "bugs/delegate_obfuscated/loss_scaler.py"}, fail=TASK1, band=(WITHOUT_TASK1, WITHOUT_TASK1)),
]

QUICK_CHECK_BUGS = [
    bug("quick_check_backward_inside", "Q2: puts backward inside autocast.",
        Patch(Q, 'Q2 = "B"  # SOLUTION', 'Q2 = "C"'), fail={"3.2"}, band=(88, 88)),
    bug("quick_check_wrong_and_skipped", "Q4 skipped (...), Q5 wrong.",
        Patch(Q, 'Q4 = "A"  # SOLUTION', "Q4 = ..."), Patch(Q, 'Q5 = "B"  # SOLUTION', 'Q5 = "A"'),
        fail={"3.4", "3.5"}, band=(86, 86)),
    bug("quick_check_not_letters", "Answers given as numbers and words.",
        Patch(Q, 'Q1 = "B"  # SOLUTION', "Q1 = 2"), Patch(Q, 'Q3 = "B"  # SOLUTION', 'Q3 = "B. unscale_"'),
        fail={"3.1", "3.3"}, band=(86, 86)),
]

#: Bugs that genuinely break more than two behaviours, with the reason (reported apart in the rows-per-bug
#: statistics, never hidden: their ``fail`` sets still name every row they lose).
CASCADES = {
    "state_never_cleared": "every behaviour observed over more than one iteration breaks: each later step() raises",
    "zero_grad_after_backward": "the gradients are gone before the step: update() and the clipping order leave no "
                                "effect to judge (torch's scaler refuses both), so rows 2.6 and 2.7 earn nothing",
    "optimizer_step_direct": "without scaler.step() torch's scaler refuses update(): row 2.6 has no effect to judge",
    "unscale_then_optimizer_step": "with the optimizer stepped directly, when update() runs has no effect: row 2.6 "
                                   "cannot be vouched for",
    "model_half": "torch's scaler refuses float16 gradients: step, update and clipping leave no effect to judge",
    "step_called_twice": "torch's scaler refuses the second step, which ends every call before update() (row 2.6 has "
                         "no effect to judge) and, the scaler never updated, every later step: training stops (2.10)",
    "update_before_step": "torch's scaler refuses update() before any step: every call ends there, so no call steps "
                          "(row 2.5 has no effect to judge) and training never moves (2.10)",
}

BUGS: list[Entry] = UPDATE_RULE_BUGS + DETECTION_BUGS + UNSCALE_STEP_BUGS + SCALE_STATE_BUGS + STATEFUL_BUGS + AMP_STEP_BUGS \
    + CHEATS + QUICK_CHECK_BUGS

# ============================================================================ variants

VARIANTS: list[Entry] = [
    variant("tensor_scale_lazy",
            "Scale as a lazily created 0-dim float32 tensor, dataclass state, tensor found_inf, _foreach_mul_.",
            files={S: "variants/tensor_scale_lazy/loss_scaler.py"}),
    variant("handout_only",
            "Written from the handout alone: ctypes float32 rounding, string stages, torch.stack detection.",
            files={S: "variants/handout_only/loss_scaler.py"}),
    variant("plain_style",
            "No type hints, boolean flags, struct rounding, mul_ by the struct-rounded reciprocal, helpers, other "
            "messages.",
            files={S: "variants/plain_style/loss_scaler.py"}),
    variant("foreach_python_reciprocal", "torch._foreach_mul_ with a Python float; found_inf from one stacked tensor.",
            Patch(S, UNSCALE_LOOP, """\
        found_inf = bool(grads) and not bool(torch.stack([torch.isfinite(g).all() for g in grads]).all())
        if grads:
            torch._foreach_mul_(grads, inv_scale)
""")),
    variant("isinf_or_isnan", "Detects overflow with isinf(...).any() | isnan(...).any().",
            Patch(S, FOUND_INF_LINE, "            found_inf |= bool((torch.isinf(grad) | torch.isnan(grad)).any())\n")),
    variant("tracker_increment_then_compare", "Counts first, then compares with ==; growth guard via FLOAT32 max.",
            Patch(S, UPDATE_GROWTH, """\
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._growth_tracker = 0
                    grown = _round_to_float32(self._scale * self._growth_factor)
                    if grown <= _FLOAT32_MAX:
                        self._scale = grown
""")),
    variant("round_direct_float32", "Rounds with torch.tensor(value, dtype=torch.float32) directly.",
            Patch(S, "    return torch.tensor(value, dtype=torch.float64).to(torch.float32).item()\n",
                  "    return float(torch.tensor(value, dtype=torch.float32))\n")),
    variant("amp_zero_grad_keep_tensors", "zero_grad(set_to_none=False).",
            Patch(A, "optimizer.zero_grad(set_to_none=True)", "optimizer.zero_grad(set_to_none=False)")),
    variant("amp_clip_model_parameters", "Clips model.parameters() instead of the optimizer's parameters.",
            Patch(A, CLIP_BLOCK, "        scaler.unscale_(optimizer)\n"
                                 "        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)\n")),
    variant("amp_manual_clip", "Clips by hand (total norm, then one coefficient) instead of clip_grad_norm_.",
            Patch(A, CLIP_BLOCK, """\
        scaler.unscale_(optimizer)
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        total = torch.sqrt(sum((g.detach().float() ** 2).sum() for g in grads))
        coefficient = max_grad_norm / (float(total) + 1e-6)
        if coefficient < 1.0:
            for g in grads:
                g.mul_(coefficient)
""")),
    variant("amp_model_zero_grad", "Zeroes the gradients with model.zero_grad() (the same parameters).",
            Patch(A, "    optimizer.zero_grad(set_to_none=True)\n", "    model.zero_grad(set_to_none=True)\n")),
    variant("amp_optimizer_base_zero_grad",
            "Zeroes through torch.optim.Optimizer.zero_grad(optimizer): torch imports torch._dynamo in the sandbox.",
            Patch(A, "    optimizer.zero_grad(set_to_none=True)\n",
                  "    torch.optim.Optimizer.zero_grad(optimizer, set_to_none=True)\n")),
    variant("amp_style", "torch.amp.autocast with positional device type, returns a detached clone.",
            Patch(A, "    with torch.autocast(device_type=device_type, dtype=dtype):\n",
                  "    with torch.amp.autocast(device_type, dtype=dtype):\n"),
            Patch(A, "    return loss.detach()\n", "    return loss.detach().clone()\n")),
    variant("answers_lowercase", "Lower-case and padded answers.",
            Patch(Q, 'Q1 = "B"  # SOLUTION', 'Q1 = "b"'), Patch(Q, 'Q4 = "A"  # SOLUTION', "Q4 = ' A '")),
]

#: Honest habits: each is a correct solution written the way real students write, and must get full marks
#: (nothing in the grader refuses a construct of the language).
HONEST_HABITS: list[Entry] = [
    variant("names_gradscaler_in_text",
            "Names torch.amp.GradScaler and the private kernels in docstrings, comments, error messages, a string "
            "annotation and an evaluated type hint (none of it calls them).",
            Patch(S, "    def get_scale(self) -> float:\n",
                  "    def compare_with(self, reference: torch.amp.GradScaler | None = None,\n"
                  "                     other: \"torch.amp.GradScaler | None\" = None) -> str:\n"
                  "        \"\"\"Like torch.amp.GradScaler.get_scale; torch uses _amp_update_scale_ for this.\"\"\"\n"
                  "        return f\"GradScaler would report {self._scale}\"  # torch.amp.GradScaler('cpu')\n\n"
                  "    def get_scale(self) -> float:\n"),
            Patch(S, 'raise RuntimeError("unscale_() is being called after step()")',
                  'raise RuntimeError("unscale_() after step(): torch.amp.GradScaler raises here too")')),
    variant("main_block_and_prints",
            "An `if __name__ == \"__main__\":` self-test importing time, random and os (never run by the grader) "
            "and a module-level print.",
            Patch(S, "_FLOAT32_MAX = 3.4028234663852886e38\n",
                  "_FLOAT32_MAX = 3.4028234663852886e38\nprint(\"loss_scaler loaded\")\n"),
            Patch(A, "    return loss.detach()\n", """\
    return loss.detach()


if __name__ == "__main__":
    import os
    import random
    import time

    random.seed(0)
    start = time.perf_counter()
    print("smoke test", os.getcwd(), time.perf_counter() - start)
""")),
    variant("dataclass_match_augassign",
            "Dataclass settings, a `match` on plain values, augmented assignment of attributes and items, "
            "nonlocal, walrus, str.format, functools, typing and math helpers.",
            Patch(S, "import torch\n", """\
import functools
from dataclasses import dataclass, field
from typing import Optional

import torch


@dataclass
class _Counters:
    clean_steps: int = 0
    seen: dict = field(default_factory=dict)


def _counted(function):
    calls = 0

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        nonlocal calls
        calls += 1
        return function(*args, **kwargs)
    return wrapper
"""),
            Patch(S, "        self._growth_tracker = 0\n        # id(optimizer)",
                  "        self._growth_tracker = 0\n        self._counters = _Counters()\n        # id(optimizer)"),
            Patch(S, "            else:\n                self._growth_tracker += 1\n        self._per_optimizer_states = {}\n",
                  """\
            else:
                self._growth_tracker += 1
        self._counters.clean_steps += 1
        self._counters.seen["updates"] = self._counters.seen.get("updates", 0)
        self._counters.seen["updates"] += 1
        match new_scale:
            case None:
                kind = "rule"
            case int() | float():
                kind = "number"
            case _:
                kind = "{} value".format("tensor")
        if (n := len(kind)) < 0:
            raise AssertionError(n)
        self._per_optimizer_states = {}
"""),
            Patch(S, "    def get_growth_tracker(self) -> int:\n", "    @_counted\n    def get_growth_tracker(self) -> int:\n")),
    variant("sparse_aware_detection",
            "Looks for inf/NaN in grad.coalesce().values() for sparse gradients; super().__init__ in a helper "
            "class; type(self).__name__ in messages.",
            Patch(S, FOUND_INF_LINE, """\
            values = grad.coalesce().values() if grad.is_sparse else grad
            found_inf = found_inf or not bool(torch.isfinite(values).all())
"""),
            Patch(S, 'raise RuntimeError("step() has already been called since the last update()")',
                  'raise _ScalerError(f"{type(self).__name__}.step() has already been called since the last update()")'),
            Patch(S, "_FLOAT32_MAX = 3.4028234663852886e38\n", """\
_FLOAT32_MAX = 3.4028234663852886e38


class _ScalerError(RuntimeError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
""")),
    variant("amp_step_habits",
            "amp_step with `from torch import autocast`, `import torch.nn.functional as F`, a GradScaler type hint "
            "and docstring, Optional, and the unscale/clip branch written with a helper.",
            Patch(A, "import torch\n", "import torch\nimport torch.nn.functional as F  # noqa: F401\n"
                                        "from torch import autocast\nfrom typing import Optional\n"),
            Patch(A, "    scaler: Any,\n", "    scaler: torch.amp.GradScaler,\n"),
            Patch(A, "    max_grad_norm: float | None = None,\n", "    max_grad_norm: Optional[float] = None,\n"),
            Patch(A, "    with torch.autocast(device_type=device_type, dtype=dtype):\n",
                  "    with autocast(device_type=device_type, dtype=dtype):\n")),
]
HONEST_HABITS.append(variant(
    "dunder_methods_and_reflection",
    "__repr__, __eq__ and __slots__ on its classes, getattr/setattr with computed names, gc.collect(), sys and "
    "inspect imported, and an amp_step that peeks at the scaler's private _scale for a debug message.",
    Patch(S, "import math\n", "import gc\nimport inspect\nimport math\nimport sys\n"),
    Patch(S, "    def get_scale(self) -> float:\n", """\
    def __repr__(self) -> str:
        return f"{type(self).__name__}(scale={getattr(self, '_' + 'scale')!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToyLossScaler) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]

    def get_scale(self) -> float:
"""),
    Patch(S, "class ToyLossScaler:\n", """\
class _Pair:
    __slots__ = ("first", "second")

    def __init__(self, first: float, second: float) -> None:
        for name, value in (("first", first), ("second", second)):
            setattr(self, name, value)


gc.collect()
_DEBUG = "debug" in sys.argv and bool(inspect.stack())


class ToyLossScaler:
"""),
    Patch(A, "    scaler.scale(loss).backward()\n",
          "    if getattr(scaler, \"_scale\", None) is None and False:\n        print(\"scale not created yet\")\n"
          "    scaler.scale(loss).backward()\n")))
VARIANTS += HONEST_HABITS

ENTRIES: list[Entry] = BUGS + VARIANTS


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("materialize", help="write every entry as a submission folder")
    make.add_argument("out", type=Path)
    sub.add_parser("list", help="list the entries")
    args = parser.parse_args(argv)
    if args.command == "list":
        for entry in ENTRIES:
            print(f"{entry.folder_name:45} {entry.description}")
        return 0
    if args.out.exists():
        shutil.rmtree(args.out)
    for entry in ENTRIES:
        materialize(entry, args.out / entry.folder_name)
    print(f"wrote {len(ENTRIES)} submissions under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
