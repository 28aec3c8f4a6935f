"""What each catalogued mistake looks like to a student, and which mistakes no answer can tell apart.

:data:`STUDENT_WORDS` completes the sentence "This is what happens when ..." for every bug of
``tests/catalogue/catalogue.py`` (kept here, not in the catalogue's entries, so the catalogue stays a
table of code and verdicts).  The words describe the mistake, never the hidden inputs that reveal it.

:data:`TWINS` lists groups of bugs that answer every recorded call of some row identically: on that
row no grader can say which of them a submission made, so a match names the whole group.  The tests
check that every indistinguishable pair the table finds is listed here (a new one fails loudly).
"""

from __future__ import annotations

from typing import Sequence

from checks.judge import diagnose
from checks.words import say

STUDENT_WORDS: dict[str, str] = {
    # Task 1: the update rule
    "growth_off_by_one": "the tracker is compared with growth_interval before this clean step is counted, "
                         "so the scale grows one clean step late",
    "tracker_not_reset_on_backoff": "the growth tracker is not reset to 0 when the scale backs off",
    "tracker_not_reset_after_growth": "the growth tracker is not reset after the scale grows",
    "tracker_counts_skipped_steps": "update() counts skipped (overflowing) steps towards growth too",
    "backoff_divides": "the scale is divided by backoff_factor instead of multiplied by it",
    "growth_to_inf": "the grown scale is kept even when it overflows float32 to inf",
    "new_scale_resets_tracker": "update(new_scale) also resets the growth tracker",
    "backoff_per_overflowing_grad": "the scale backs off once per overflowing gradient instead of once per update()",
    "backoff_per_overflowing_optimizer": "the scale backs off once per overflowing optimizer instead of once "
                                         "per update()",
    "no_float32_rounding": "the scale is kept as a Python (float64) product instead of being rounded to float32",
    "new_scale_keeps_optimizer_state": "update(new_scale) returns before clearing the per-optimizer state",
    "init_scale_not_rounded": "init_scale is kept as given instead of being rounded to float32",
    "wrong_default_interval": "growth_interval defaults to something other than torch's 2000",
    # Task 1: overflow detection
    "nan_ignored": "only inf is looked for, so NaN gradients are not detected",
    "only_last_grad_checked": "found_inf is overwritten in the loop, so only the last gradient counts",
    "only_first_grad_checked": "only the first gradient is checked for inf/NaN",
    "only_first_param_group": "only the optimizer's first parameter group is unscaled and checked",
    "crash_on_none_grads": "parameters whose .grad is None are not skipped",
    "checks_inf_after_unscale": "inf/NaN is looked for after unscaling instead of before",
    "inf_check_via_sum": "inf/NaN is detected through the sum of each gradient (a finite sum can overflow)",
    # Task 1: unscale_, step, state
    "unscale_multiplies_by_scale": "unscale_() multiplies the gradients by the scale instead of its reciprocal",
    "unscale_not_in_place": "unscale_() replaces each .grad with a new tensor instead of changing it in place",
    "step_unscales_twice": "step() unscales again after an explicit unscale_()",
    "double_unscale_no_error": "a second unscale_() in the same iteration unscales again instead of raising",
    "update_without_step_no_error": "update() without a step() or unscale_() since the last update() "
                                    "does not raise",
    "step_returns_none": "step() does not return what optimizer.step() returned",
    "steps_on_inf": "step() calls optimizer.step() even when a gradient is inf or NaN",
    "step_ignores_unscale_inf": "step() ignores the inf/NaN that an explicit unscale_() found and steps anyway",
    "state_never_cleared": "update() never clears the per-optimizer state",
    "update_looks_at_last_optimizer": "update() looks only at the optimizer stepped last",
    "float16_grads_not_rejected": "unscale_() accepts float16 gradients instead of raising ValueError",
    "scale_python_float": "scale() multiplies by a Python float, so a float16 loss stays float16",
    "scale_tuple_becomes_list": "scale() returns a list when given a tuple",
    "load_state_dict_drops_tracker": "load_state_dict() does not restore the growth tracker",
    "state_dict_wrong_key": "state_dict() names the tracker differently from torch's '_growth_tracker'",
    "constructor_accepts_growth_factor_one": "the constructor accepts growth_factor == 1",
    # Task 2: amp_step
    "backward_inside_autocast": "backward() is called inside the autocast block",
    "no_zero_grad": "the gradients are never zeroed, so they accumulate across calls",
    "zero_grad_after_backward": "the gradients are zeroed after backward(), so the step sees none",
    "optimizer_step_direct": "optimizer.step() is called instead of scaler.step(optimizer)",
    "unscale_then_optimizer_step": "the gradients are unscaled and then optimizer.step() is called directly",
    "update_before_step": "scaler.update() is called before scaler.step(optimizer)",
    "no_update": "scaler.update() is never called",
    "clip_before_unscale": "the gradients are clipped before they are unscaled",
    "clip_without_unscale": "the gradients are clipped without calling scaler.unscale_() first",
    "model_half": "the model is converted with .half() instead of running under autocast",
    "unscaled_backward": "backward() is called on the unscaled loss",
    "no_autocast": "the forward pass and the loss run without autocast",
    "hardcoded_cuda": "autocast's device_type is hard-coded to \"cuda\"",
    "hardcoded_dtype": "autocast's dtype is hard-coded to float16",
    "renamed_parameter": "amp_step's parameters are named differently from the contract",
    "uses_gradscaler_internals": "amp_step reads private attributes of torch.amp.GradScaler",
    "returns_scaled_loss": "amp_step returns the scaled loss",
    "returns_attached_loss": "amp_step returns the loss still attached to the graph (not detached)",
    "returns_python_float": "amp_step returns loss.item() instead of a tensor",
    "early_return_on_overflow": "scaler.update() is skipped, together with the step, whenever the gradients "
                                "overflowed, so the scale never backs off",
    "update_only_after_clean_step": "scaler.update() is called only when the gradients were finite, so after a "
                                    "skipped step the scaler is never updated and refuses the next step",
    "unscale_twice": "scaler.unscale_() is called a second time before scaler.step(optimizer), which torch's scaler "
                     "refuses",
    "unscale_after_step": "scaler.unscale_() and clipping come after scaler.step(optimizer), which torch's scaler "
                          "refuses",
    "update_called_twice": "scaler.update() is called twice in one iteration, after scaler.step(optimizer)",
    "step_called_twice": "scaler.step(optimizer) is called twice in one iteration, before scaler.update()",
    "unscale_before_backward": "scaler.unscale_() is called before backward(), so the gradients clipped afterwards "
                               "are still scaled",
    # Delegation to torch's scaler, which is not there where loss_scaler.py runs
    "delegate_subclass": "ToyLossScaler subclasses torch.amp.GradScaler",
    "delegate_wrapper": "ToyLossScaler wraps torch.amp.GradScaler",
    "delegate_kernels": "ToyLossScaler calls torch's private AMP kernels",
    "delegate_obfuscated": "ToyLossScaler reaches torch.amp.GradScaler indirectly",
    # Task 3
    "quick_check_backward_inside": "the Quick Check answer to Q2 puts backward() inside autocast",
    "quick_check_wrong_and_skipped": "a Quick Check answer is skipped or wrong",
    "quick_check_not_letters": "the Quick Check answers are not given as letters",
}

#: Groups of bugs that answer some row's recorded calls identically (see the module docstring), found by
#: building the table of the whole catalogue (``python -m autograder.diagnosis build --variants all``).
TWINS: tuple[frozenset[str], ...] = (
    # on a CPU, autocast with device_type="cuda" does nothing: the forward runs in float32 either way (2.1)
    frozenset({"hardcoded_cuda", "no_autocast"}),
    # the misuse row's recorded calls (1.13) get the same answers from both
    frozenset({"state_never_cleared", "update_without_step_no_error"}),
    # both subclass torch.amp.GradScaler at import, which the stand-in refuses alike
    frozenset({"delegate_subclass", "delegate_obfuscated"}),
)


def sentence(bugs: Sequence[str]) -> str:
    """The student's line for a match with ``bugs`` (one bug, or one group of twins)."""
    return diagnose.sentence(bugs, STUDENT_WORDS)


def described(bugs: Sequence[str]) -> str:
    """What happens when ``bugs`` are made, for a table that heads its column with "what happens when"."""
    return say("mistake.words", words=diagnose.described(bugs, STUDENT_WORDS))
