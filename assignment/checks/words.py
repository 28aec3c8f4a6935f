"""What the checks say to a student, in every language the homework speaks: one table of templates by message id,
and one of each catalogued mistake's words by bug name (:data:`MISTAKES`, what a "Likely mistake" line says).

English is the default and the reference; the Korean edition says the same things (``$AMP_LANGUAGE=ko``).
Only words change with the language: code, values and identifiers in a message stay as they are, so a
snippet pasted from a Korean message runs the same as from an English one.

The language is ``$AMP_LANGUAGE`` (``en`` or ``ko``; anything else reads as English here, where a check must
never fail over a setting: the grader's command line refuses an unknown one).

A student process always speaks English (:func:`english`), and sends each message's id and fields beside its text:
the judge renders them in the current language where the text stands (:func:`shown`).  A message missing in a
language reads as the English one (:func:`template`).

Standard library only: the student processes, the public checks and the grader's batch summary all import it.
Why one long file: it is data, every message once per language side by side with its id; a reader (or a
translator) scans it as a table.
"""

from __future__ import annotations

import os
import re
import string
from typing import Any

ENV = "AMP_LANGUAGE"
DEFAULT = "en"

EN: dict[str, str] = {
    # ---- the frame of a scaler snippet (checks.judge.expect)
    "snippet.after": "After running:\n{snippet}\n",
    "snippet.should": "the last line should: {want}\n",
    "snippet.but": "but with your code it {shown}",
    "snippet.traceback": "\n\nYour traceback:\n{trace}",
    "snippet.optimizer_comment": "the grader's optimizer: step() returns 1000.0 + how often it ran",
    "snippet.checks_comment": "run this in your assignment folder: it imports checks/",
    # ---- the comments of an amp_step snippet (checks.judge.amp_snippet)
    "snippet.model_comment": "the grader's small MLP; its loss is model.loss",
    "snippet.torch_scaler_comment": "torch.amp.GradScaler('cpu'), its scale made up front as the grader's",
    "snippet.contract_comment": "torch's GradScaler behind the contract's methods only",
    "snippet.calls_before": "the calls before call {number} (an error is printed, the loop goes on, as the grader's)",
    "snippet.inf_comment": "the backward pass puts an inf into the gradients, as the grader's probe does",
    "snippet.seen_comment": "each gradient as the last backward pass left it (zeros until one reaches it)",
    "snippet.none_grad_comment": "no gradient counts as zeros",
    "snippet.stage_comment": "torch's record for this optimizer: ready, unscaled or stepped",
    "snippet.underflow_data_comment": "the demo's data, drawn as the grader draws them",
    "do.print_loss_below": "print a loss below {limit}",
    # what the last line does ("does.*") and should do ("do.*")
    "does.print": "prints {value}",
    "does.print_nothing": "prints nothing",
    "does.raise": "raises {error}",
    "does.run": "runs without error",
    "do.print": "print {value}",
    "do.print_nothing": "print nothing",
    "do.raise": "raise {error}",
    "do.run": "run without error",
    "do.print_keys": "print a dict with the keys {keys}",
    "do.print_state": "print a state_dict() with {state}",
    "do.print_as_single": "print {value} (what it prints with one overflowing gradient:\n{snippet}\n)",
    "do.print_found": "print {value} (the gradients hold inf/NaN)",
    "do.print_not_found": "print {value} (the gradients hold no inf/NaN)",
    "results.malformed": "{got} results came back for {calls} calls: your code's process returned something malformed",
    "raised.with_trace": "{what}\nbut your code raised {error}: {message}\n{trace}",
    "before.update_scale": "\n(The observation before this update() printed {scale}.)",
    "before.update_pair": "\n(The observation before this update() printed {scale} {tracker}.)",
    "before.new_scale": "\n(The observation before this update printed {scale} {tracker}.)",
    # ---- what each scaler behaviour must do (checks.judge.behaviours, the public scaler checks)
    "what.constructor": "ToyLossScaler({kwargs}) must raise ValueError.",
    "what.constructor_edge": "ToyLossScaler({kwargs}) must be accepted: float32 holds this init_scale (torch accepts "
                             "it too); only bad arguments raise ValueError.",
    "what.scale": "scale() must multiply by the scale held as a 0-dim float32 tensor: a 0-dim float16 loss comes "
                  "back float32 (no overflow above 65504); a float16 tensor with dimensions keeps its dtype (torch's "
                  "type promotion).",
    "what.unscale": "unscale_() must multiply every existing .grad by the float32 reciprocal of the scale, in place "
                    "(same tensor objects), skipping None grads; step() after it must not unscale again.",
    "what.backoff": "After an iteration with inf/NaN in any optimizer's gradients, update() must multiply the scale by "
                    "backoff_factor (rounded to float32) and reset the growth tracker to 0.",
    "what.growth": "After a clean iteration, update() must add 1 to the growth tracker; when that makes it equal to "
                   "growth_interval, multiply the scale by growth_factor (rounded to float32) and reset the tracker "
                   "to 0.",
    "what.float32": "The scale is a float32 value: init_scale is rounded to float32, and each new scale is the float64 "
                    "product scale * factor rounded to float32 (as torch stores it).",
    "what.no_growth_to_inf": "A growth that would overflow float32 must be skipped: the scale stays as it was (finite).",
    "what.new_scale": "update(new_scale) sets the scale to new_scale (rounded to float32), leaves the growth tracker "
                      "alone and, like every update(), lets the next iteration start fresh.",
    "what.new_scale_beyond": "update(new_scale) with a finite new_scale beyond float32's range (its magnitude above "
                             "3.4028234663852886e38) must raise RuntimeError, as torch does: the scale, a float32, "
                             "cannot hold it.",
    "what.one_backoff": "One update() backs off once however many gradients overflow: with {bad} overflowing "
                        "gradient(s) in each of {opts} optimizer(s) the scale and tracker must be what they are with a "
                        "single overflowing gradient in a single optimizer.",
    "what.matches_torch": "Your scaler must behave exactly like torch.amp.GradScaler('cpu') on this run: the same "
                          "scale, tracker and skipped steps (exactly for power-of-two factors, to 1e-6 otherwise), "
                          "parameters to 1e-6.",
    "what.stateful": "Your scaler must behave exactly like torch.amp.GradScaler('cpu') after any sequence of calls: "
                     "every result, error and observation bit for bit (the gradients are multiplied by the float32 "
                     "reciprocal of the scale; a growth tracker restored at or above growth_interval keeps counting). "
                     "This is the shortest sequence found where yours differs.",
    "what.skipped_step": "step() must skip optimizer.step() (return None and leave the parameters as they were) when a "
                         "gradient holds inf or -inf, also when it was found by an explicit unscale_() before step() "
                         "(as when clipping), and otherwise return what optimizer.step() returned. (Here the inf is "
                         "found by {found_by}.)",
    "found_by.step": "step()'s own unscaling",
    "found_by.unscale": "an explicit unscale_()",
    "found_by.clip": "an explicit unscale_() (before clipping)",
    "what.overflow_detection": "unscale_()/step() must find inf/NaN exactly when a gradient, as it is before "
                               "unscaling, holds +inf, -inf or NaN anywhere (finite values, however large, and finite "
                               "values that only overflow once multiplied by 1/scale, do not count); update() then "
                               "backs off, and otherwise leaves the scale alone.",
    "what.misuse": "{calls}: the last call must raise RuntimeError, the ones before it must not.",
    "what.misuse_then": " then ",
    "what.float16": "unscale_() must raise ValueError for float16 gradients, leaving them and the scaler as they were "
                    "(so trying again raises ValueError again).",
    "what.lists": "scale() of a {container} must return a {container} holding what scale() returns for each item.",
    "what.nested": "scale() of a list holding a tensor and a tuple of tensors must return the same nesting: a list "
                   "holding what scale() returns for the tensor and a tuple of what it returns for each item.",
    "what.lists_item": "scale() of one tensor must run: each item of the {container} is scaled alone first, to compare "
                       "with what scale() of the {container} returns.",
    "what.state": "state_dict() returns torch's five keys; a new scaler that loads it (with load_state_dict) returns "
                  "the same state_dict() and the same scale and tracker.",
    "what.state_source": "{what} (The state loaded here was saved by {source}.)",
    "state_source.yours": "your scaler",
    "what.defaults": "ToyLossScaler() must have torch's defaults: init_scale=2**16, growth_factor=2.0, "
                     "backoff_factor=0.5, growth_interval=2000.",
    # ---- Task 2 (the public amp_step checks, checks.judge.effects)
    "amp.called": "We called\n    {call}\n{steps} time{plural} on a small MLP, SGD(lr={lr}) and {scaler}{overflow}.",
    "amp.plural": "s",
    "amp.contract_scaler": "a scaler with only the contract's methods (torch's inside)",
    "amp.overflow": "; the gradients of call {calls} held an inf",
    "amp.masked_head": "We cannot see whether your amp_step gets this right {right}:",
    "amp.masked_hint": "Fix the other behaviour first ({masked}); this row is judged on its effects.",
    "amp.differ_head": "Compared with a correct amp_step {right}, the effects differ:",
    "amp.seen": "What your amp_step called:",
    "amp.seen_call": "    call {number}: {order}",
    "amp.right.forward_under_autocast": "(forward and loss under torch.autocast with the dtype it was given)",
    "amp.right.backward_outside_autocast": "(backward after the autocast block)",
    "amp.right.backward_of_scaled_loss": "(backward of scaler.scale(loss))",
    "amp.right.zero_grad_every_step": "(optimizer.zero_grad() before the forward pass)",
    "amp.right.step_through_scaler": "(scaler.step(optimizer) once, which skips the step when gradients overflowed)",
    "amp.right.update_after_step": "(scaler.update() once, after scaler.step(optimizer))",
    "amp.right.unscale_before_clipping": "(scaler.unscale_(optimizer), then clipping, then scaler.step(optimizer))",
    "amp.right.returned_loss": "(returns the unscaled loss, detached)",
    "amp.right.any_scaler": "",
    "amp.hint.forward_under_autocast":
        "Run the model's forward and the loss inside `with torch.autocast(device_type=device_type, dtype=dtype):`, "
        "with the device type and dtype amp_step was given, and keep the model in float32 (no .half()).",
    "amp.hint.backward_outside_autocast":
        "Call backward() after the `with torch.autocast(...)` block ends: autocast would recast the backward "
        "pass's own matmuls (the model's backward here has one).",
    "amp.hint.backward_of_scaled_loss": "Call backward() on scaler.scale(loss), not on the loss itself.",
    "amp.hint.zero_grad_every_step":
        "Call optimizer.zero_grad() at the start of amp_step, so that each call's step sees only its own gradients.",
    "amp.hint.step_through_scaler":
        "Step with scaler.step(optimizer), once per call, never optimizer.step() directly: the scaler skips the "
        "step when the gradients hold an inf or NaN.",
    "amp.hint.update_after_step": "Call scaler.update() exactly once per call, after scaler.step(optimizer).",
    "amp.hint.unscale_before_clipping":
        "With max_grad_norm set, call scaler.unscale_(optimizer) before clip_grad_norm_ (so you clip the true "
        "gradients), then scaler.step(optimizer).",
    "amp.hint.returned_loss":
        "Return the unscaled loss of this call as a one-element tensor detached from the graph "
        "(loss.detach()).",
    "amp.hint.any_scaler":
        "amp_step must work with any scaler that has the contract's methods, called with positional or keyword "
        "arguments (the contract's parameter names: model, inputs, targets, loss_fn, optimizer, scaler).",
    "amp.underflow": "We trained the underflow demo (fp16 autocast, targets x 1e-4) for {steps} steps with your "
                     "amp_step and torch.amp.GradScaler('cpu', growth_interval={interval})",
    "amp.underflow_weight": "{what}, but after training the model's weight was {weight}: it must stay the model's own "
                            "float32 parameter.",
    "amp.underflow_stalled": "{what}. Without scaling the loss stalls near 3e-10; with it the loss should fall below "
                             "1e-12, but the final weight gives {final}.",
    "amp.underflow_steps": "{what}. The weight must be reached by AMP steps: we replayed each call from the state the "
                           "previous one left, with an amp_step making your choices, and {why}",
    "amp.underflow_raised": "{what}. Call {number} raised {error}: {message}\n{trace}",
    # the effects that differ, one line each
    "effects.after_call": "after call {number}",
    "effects.call": "call {number}",
    "effects.none_back": "{where}: no effects came back (an earlier call raised)",
    "effects.raised": "call {number} raised {error}: {message}\n{trace}",
    "effects.refused": "call {number}: torch's scaler refused scaler.{call}() ({error}); in a real training loop "
                       "this error ends the run\n{trace}",
    "effects.should_raise": "call {number} should end with torch's refusal of scaler.{call}() ({error}), as this "
                            "amp_step's other choices make it",
    "effects.but_raised": ", but it raised {error}",
    "effects.but_returned": ", but it returned",
    "effects.wrong_count": "{where}: the effects came back for the wrong number of parameters",
    "effects.mismatch": "{name} should be {want} but is {have}",
    "effects.mismatch_worst": "{name} should be {want} but is {have}; element {worst} differs most: {expected} "
                              "expected, {found} found",
    "effects.backward_grad": "{name}.grad as the backward pass left it",
    "effects.parameter": "parameter {number}",
    "effects.scaler": "{where}: the scaler's (scale, growth tracker, stage) should be ({want}) but is ({have})",
    "effects.returned_type": "{where} returned a {kind}: amp_step must return the loss as a one-element torch.Tensor",
    "effects.returned_size": "{where} returned a tensor of {numel} elements: the loss has one",
    "effects.returned_attached": "{where} returned a loss still attached to the graph: return loss.detach()",
    "effects.returned_value": "{where} returned {value} but the unscaled loss is {expected}",
    "effects.more": "    ... and {more} more",
    # the phases of a training step, as the probe names them
    "phase.forward": "forward",
    "phase.loss": "loss",
    "phase.backward": "backward",
    # what the probe saw, in call order
    "order.never_made": "nothing (the call was never made)",
    "order.nothing": "nothing",
    "order.autocast": " (autocast {dtype})",
    "order.no_autocast": " (no autocast)",
    "order.direct_step": "optimizer.step() directly",
    "order.scaler_error": "scaler error ({call}: {error})",
    # what the log says about a row
    "explain.ran_under": "the model's {event} ran under autocast {dtype}",
    "explain.ran_without": "the model's {event} ran without autocast",
    "explain.backward_inside": "The backward pass ran inside torch.autocast.",
    "explain.grad_ratio": "The gradient reaching the model's output was {ratio} x the true gradient (the scale: {scale}).",
    "explain.direct_step": "amp_step called optimizer.step() directly.",
    "explain.step_twice": "Call {number} called scaler.step(optimizer) {count} times: torch's scaler refuses the second "
                          "(\"step() has already been called since the last update()\"), which ends the call.",
    "explain.updates": "Call {number} called scaler.update() {count} time(s)",
    "explain.updates_before_step": ", before scaler.step(optimizer).",
    "explain.updates_end": ".",
    "explain.update_twice": " torch's scaler refuses the second (\"No inf checks were recorded prior to update.\"), "
                            "which ends the call.",
    "explain.no_unscale": "amp_step never called scaler.unscale_(optimizer).",
    "explain.clip_before_unscale": "Call {number} called clip_grad_norm_ before scaler.unscale_(optimizer): it clipped the "
                                   "scaled gradients.",
    "explain.unscale_twice": "Call {number} called scaler.unscale_(optimizer) {count} times: torch's scaler refuses the second "
                             "(\"unscale_() has already been called on this optimizer since the last update()\"); "
                             "scaler.step(optimizer) needs no unscale_ of its own, it unscales gradients not yet "
                             "unscaled.",
    "explain.unscale_after_step": "Call {number} called scaler.unscale_(optimizer) after scaler.step(optimizer): torch's scaler "
                                  "refuses it (\"unscale_() is being called after step()\"), and clipping after the "
                                  "step would come too late anyway.",
    # ---- the GPU part (checks/test_gpu.py)
    "gpu.measured": "Measured by the grader, outside your process: the wall time of each call's round trip ({steps} "
                    "training steps from a fresh seed, building the data and model, copying the weights out), and the "
                    "loss of the copied-out weights on the grader's own evaluation batch ({rows} examples, computed "
                    "in float32 on the grader's CPU). TF32 is off in the float32 runs.",
    "gpu.run": "run {number}: float32 {seconds}, loss {loss} (from {initial} before training)",
    "gpu.run_amp": "; AMP {seconds}, loss {loss}",
    "gpu.speedup": "Speed-up to float32's loss (median round trips): {speedup}x ",
    "gpu.dry": "(dry mode on the CPU: not checked)",
    "gpu.required": "(required: at least {minimum}x)",
    "gpu.trained": "We trained a {depth}-hidden-layer MLP (width {width}, batch {batch}) for {steps} steps, {repeats} "
                   "times (each from a fresh seed, after a {warmup}-step warm-up), on {device} with\n    {call}\n",
    "gpu.not_parameters": "{what}but after training {weights}: the grader computes the loss from the model's "
                          "parameters, which must stay plain float32 torch.nn.Parameter objects.",
    "gpu.loss": "{what}and in run {number} the trained model's loss, computed by the grader from the weights your "
                "process copied out, is {loss}; the same {steps} steps in float32 reach {loss32} (allowed: up to "
                "{allowed}; {initial} before training). Does the optimizer step through the scaler, once per call, "
                "with the gradients zeroed first?\n\n{summary}",
    "gpu.not_trained": "{what}and in run {number} the trained weights lie {distance} away from where the same {steps} "
                       "steps in float32 take them (as a fraction of how far training moved them; AMP's rounding "
                       "stays well within {allowed}): the weights must come from the steps amp_step takes on the "
                       "batches it is given, one optimizer step per call.\n\n{summary}",
    "gpu.slow": "{what}The runs through your amp_step took {speedup}x less wall time than float32's (median round "
                "trips, measured by the grader outside your process); at least {minimum}x is expected on a GPU. Are "
                "the forward pass and the loss under torch.autocast(device_type='cuda', dtype=torch.float16)?  Does "
                "amp_step avoid syncing with the GPU (loss.item(), float(loss), printing) on every call?\n\n{summary}",
    "gpu.underflow": "We trained the underflow task (linear regression onto targets x 1e-4, float16 autocast on "
                     "{kind}) for {steps} steps with your amp_step and torch.amp.GradScaler({kind_repr}, "
                     "growth_interval=20)",
    "gpu.underflow_weight": "{what}, but the model's weight was no plain float32 parameter after training ({weight}): "
                            "the grader computes the loss from it.",
    "gpu.underflow_stalled": "{what}. The grader computed the float32 mean squared error of the model's final weight "
                             "(copied out of your process) over the task's {n} examples: {final}. Without a scaler "
                             "the float16 gradients underflow to zero and the loss stalls at {unscaled}; with the "
                             "scaler's scaled backward it should fall below 1e-12. Call backward() on "
                             "scaler.scale(loss), and step through scaler.step(optimizer).",
    "gpu.underflow_no_steps": "{what}, but your process did not copy out the weight after each of the {steps} steps "
                              "(the harness does, unless it was changed): the grader replays every step.",
    "gpu.underflow_not_amp": "{what}, but the weight after step {step} does not follow from the one before by an AMP "
                             "step on the data amp_step was given (the grader replayed the step: the float16 "
                             "autocast gradient of the scaled loss, unscaled, one optimizer step). Each call must "
                             "take one such step (or skip it when a gradient overflows); writing weights into the "
                             "model earns nothing.",
    "gpu.scaler": "With every parameter, gradient and scaled tensor on {kind} (add device={kind} to each tensor "
                  "below), your scaler must behave exactly like torch.amp.GradScaler({kind}): the same scale, tracker "
                  "and skipped steps (exactly for power-of-two factors, to 1e-6 otherwise), parameters to 1e-6.",
    # ---- a submission's files (checks.runners.harness, checks.student.absence, checks.plugin)
    "file.missing": "{file} is missing: upload it at the top level of your submission.",
    "file.not_utf8": "{file} is not valid UTF-8 text (byte {byte}): save it as UTF-8.",
    "file.syntax": "{file} has a syntax error on line {line}: {message}",
    "file.import_raised": "importing {file} raised an exception:\n{frames}",
    "file.undefined": "{file} does not define `{name}`.",
    "scenario.stopped": "the scenario stopped with {error}: {message}",
    "refused.task1": "{what} is not available while loss_scaler.py runs: Task 1 asks you to write the loss scaler "
                     "yourself (see \"What your code may not use\" in the handout)",
    "process.ended": "the process running your code ended during this call (it exited or crashed)",
    # ---- the "Likely mistake" line (checks.judge.diagnose)
    "mistake.line": "Likely mistake: this is what happens when {words}.",
    "mistake.or": ", or when ",
    "mistake.section": "likely mistake",
}

KO: dict[str, str] = {
    "snippet.after": "다음 코드를 실행하면:\n{snippet}\n",
    "snippet.should": "마지막 줄의 올바른 결과: {want}\n",
    "snippet.but": "여러분의 코드의 결과: {shown}",
    "snippet.traceback": "\n\n여러분의 코드의 트레이스백:\n{trace}",
    "snippet.optimizer_comment": "채점기의 옵티마이저: step()은 1000.0 + 실행 횟수를 돌려줌",
    "snippet.checks_comment": "과제 폴더에서 실행하세요: checks/를 가져옵니다",
    "snippet.model_comment": "채점기의 작은 MLP; 손실은 model.loss",
    "snippet.torch_scaler_comment": "torch.amp.GradScaler('cpu'), 채점기처럼 스케일을 미리 만듦",
    "snippet.contract_comment": "계약의 메서드만 보이는 torch의 GradScaler",
    "snippet.calls_before": "{number}번째 호출 전의 호출들 (채점기처럼 오류는 출력하고 반복은 계속됨)",
    "snippet.inf_comment": "채점기의 프로브처럼 역전파가 기울기에 inf를 넣음",
    "snippet.seen_comment": "마지막 역전파가 남긴 각 기울기 (역전파가 닿기 전에는 0)",
    "snippet.none_grad_comment": "기울기가 없으면 0으로 봄",
    "snippet.stage_comment": "이 옵티마이저에 대한 torch의 기록: ready, unscaled 또는 stepped",
    "snippet.underflow_data_comment": "채점기와 같은 방식으로 뽑은 데모 데이터",
    "do.print_loss_below": "{limit}보다 작은 손실 출력",
    "does.print": "{value} 출력",
    "does.print_nothing": "아무것도 출력하지 않음",
    "does.raise": "{error} 발생",
    "does.run": "오류 없이 실행됨",
    "do.print": "{value} 출력",
    "do.print_nothing": "아무것도 출력하지 않음",
    "do.raise": "{error} 발생",
    "do.run": "오류 없이 실행",
    "do.print_keys": "키가 {keys}인 딕셔너리 출력",
    "do.print_state": "다음 값을 담은 state_dict() 출력: {state}",
    "do.print_as_single": "{value} 출력 (오버플로한 기울기가 하나뿐일 때 출력하는 값:\n{snippet}\n)",
    "do.print_found": "{value} 출력 (기울기에 inf/NaN이 있음)",
    "do.print_not_found": "{value} 출력 (기울기에 inf/NaN이 없음)",
    "results.malformed": "호출 {calls}번에 결과가 {got}개 돌아왔습니다. 여러분의 코드를 실행한 프로세스가 잘못된 값을 "
                         "돌려주었습니다",
    "raised.with_trace": "{what}\n그런데 여러분의 코드에서 {error} 예외가 발생했습니다: {message}\n{trace}",
    "before.update_scale": "\n(이 update() 바로 전에 출력된 관측값: {scale}.)",
    "before.update_pair": "\n(이 update() 바로 전에 출력된 관측값: {scale} {tracker}.)",
    "before.new_scale": "\n(이 update 바로 전에 출력된 관측값: {scale} {tracker}.)",
    "what.constructor": "ToyLossScaler({kwargs})는 ValueError를 발생시켜야 합니다.",
    "what.constructor_edge": "ToyLossScaler({kwargs})는 받아들여져야 합니다. float32는 이 init_scale을 담을 수 있고 "
                             "(torch도 받아들입니다), 잘못된 인자만 ValueError를 발생시킵니다.",
    "what.scale": "scale()은 0차원 float32 텐서로 들고 있는 스케일을 곱해야 합니다. 0차원 float16 손실은 float32로 "
                  "돌아오고(65504를 넘어도 오버플로 없음), 차원이 있는 float16 텐서는 dtype을 유지합니다(torch의 타입 "
                  "승격 규칙).",
    "what.unscale": "unscale_()는 존재하는 모든 .grad에 스케일의 float32 역수를 제자리에서(같은 텐서 객체) 곱하고 None "
                    "기울기는 건너뛰어야 합니다. 그 뒤의 step()은 다시 언스케일하면 안 됩니다.",
    "what.backoff": "어느 옵티마이저의 기울기에든 inf/NaN이 있었던 반복 뒤에는 update()가 스케일에 backoff_factor를 "
                    "곱하고(float32로 반올림) 성장 추적기를 0으로 초기화해야 합니다.",
    "what.growth": "깨끗한 반복 뒤에는 update()가 성장 추적기에 1을 더해야 합니다. 그 결과 추적기가 growth_interval과 "
                   "같아지면 스케일에 growth_factor를 곱하고(float32로 반올림) 추적기를 0으로 초기화합니다.",
    "what.float32": "스케일은 float32 값입니다. init_scale은 float32로 반올림되고, 새 스케일은 매번 float64 곱 "
                    "scale * factor를 float32로 반올림한 값입니다(torch가 저장하는 방식).",
    "what.no_growth_to_inf": "float32를 오버플로하게 될 성장은 건너뛰어야 합니다. 스케일은 그대로(유한한 값) 남습니다.",
    "what.new_scale": "update(new_scale)은 스케일을 new_scale(float32로 반올림)로 정하고 성장 추적기는 건드리지 않으며, "
                      "다른 모든 update()처럼 다음 반복이 새로 시작하게 합니다.",
    "what.new_scale_beyond": "float32 범위를 넘는 유한한 new_scale(절댓값이 3.4028234663852886e38보다 큼)로 "
                             "update(new_scale)을 부르면 torch처럼 RuntimeError가 발생해야 합니다. float32인 스케일은 "
                             "그 값을 담을 수 없습니다.",
    "what.one_backoff": "update() 한 번은 오버플로한 기울기가 몇 개든 백오프를 한 번만 합니다. 옵티마이저 {opts}개 각각에 "
                        "오버플로한 기울기가 {bad}개 있을 때의 스케일과 추적기는 옵티마이저 하나에 오버플로한 기울기가 "
                        "하나뿐일 때와 같아야 합니다.",
    "what.matches_torch": "이 실행에서 여러분의 스케일러는 torch.amp.GradScaler('cpu')와 똑같이 동작해야 합니다. 스케일, "
                          "추적기, 건너뛴 스텝이 같아야 하고(2의 거듭제곱 계수에서는 정확히, 그 밖에는 1e-6까지), "
                          "파라미터는 1e-6까지 같아야 합니다.",
    "what.stateful": "어떤 호출 순서 뒤에도 여러분의 스케일러는 torch.amp.GradScaler('cpu')와 똑같이 동작해야 합니다. "
                     "모든 결과, 오류, 관찰값이 비트 단위로 같아야 합니다(기울기에는 스케일의 float32 역수를 곱하고, "
                     "growth_interval 이상으로 복원된 성장 추적기는 계속 셉니다). 여러분의 것이 달라지는 가장 짧은 "
                     "호출 순서는 다음과 같습니다.",
    "what.skipped_step": "기울기에 inf나 -inf가 있으면 step()은 optimizer.step()을 건너뛰어야 합니다(None을 돌려주고 "
                         "파라미터는 그대로 둠). step() 전에 명시적으로 호출한 unscale_()가 찾아낸 경우(클리핑할 때처럼)도 "
                         "마찬가지입니다. 그렇지 않으면 optimizer.step()이 돌려준 값을 돌려줍니다. (여기서 inf를 찾은 "
                         "것: {found_by}.)",
    "found_by.step": "step() 자신의 언스케일",
    "found_by.unscale": "명시적으로 호출한 unscale_()",
    "found_by.clip": "명시적으로 호출한 unscale_() (클리핑 전)",
    "what.overflow_detection": "unscale_()/step()은 언스케일하기 전의 기울기 어딘가에 +inf, -inf, NaN이 있을 때, 그리고 "
                               "그때만 inf/NaN을 찾아야 합니다. 아무리 커도 유한한 값과, 1/scale을 곱해야만 오버플로하는 "
                               "유한한 값은 해당하지 않습니다. 찾았으면 update()가 백오프하고, 아니면 스케일을 그대로 "
                               "둡니다.",
    "what.misuse": "{calls}: 마지막 호출은 RuntimeError를 발생시켜야 하고, 그 앞의 호출은 발생시키면 안 됩니다.",
    "what.misuse_then": " 다음에 ",
    "what.float16": "unscale_()는 float16 기울기에 대해 ValueError를 발생시키고, 기울기와 스케일러를 그대로 두어야 "
                    "합니다(그래서 다시 호출해도 또 ValueError가 발생합니다).",
    "what.lists": "{container}에 대한 scale()은 같은 종류의 컨테이너({container})에 각 항목의 scale() 결과를 담아 돌려주어야 "
                  "합니다.",
    "what.nested": "텐서 하나와 텐서들의 튜플을 담은 리스트에 대한 scale()은 같은 중첩을 돌려주어야 합니다. 곧 그 텐서에 대한 "
                   "scale() 결과와, 튜플의 각 항목에 대한 scale() 결과를 담은 튜플을 담은 리스트입니다.",
    "what.lists_item": "텐서 하나에 대한 scale()이 실행되어야 합니다. {container}에 대한 scale()의 결과와 비교하려고 "
                       "{container}의 각 항목을 먼저 따로 스케일합니다.",
    "what.state": "state_dict()는 torch의 다섯 키를 돌려줍니다. 그것을 (load_state_dict로) 불러온 새 스케일러는 같은 "
                  "state_dict()와 같은 스케일, 추적기를 돌려줍니다.",
    "what.state_source": "{what} (여기서 불러온 상태를 저장한 것: {source}.)",
    "state_source.yours": "여러분의 스케일러",
    "what.defaults": "ToyLossScaler()의 기본값은 torch와 같아야 합니다: init_scale=2**16, growth_factor=2.0, "
                     "backoff_factor=0.5, growth_interval=2000.",
    "amp.called": "작은 MLP, SGD(lr={lr}), {scaler}로 다음 호출을 {steps}번 실행했습니다{overflow}.\n    {call}",
    "amp.plural": "",
    "amp.contract_scaler": "계약의 메서드만 가진 스케일러(안에는 torch의 스케일러)",
    "amp.overflow": " (호출 {calls}의 기울기에는 inf가 있었습니다)",
    "amp.masked_head": "여러분의 amp_step이 이 동작 {right}을 올바르게 하는지 알 수 없습니다:",
    "amp.masked_hint": "다른 동작({masked})을 먼저 고치세요. 이 항목은 효과로 판정합니다.",
    "amp.differ_head": "올바른 amp_step {right}에 비해 효과가 다릅니다:",
    "amp.seen": "여러분의 amp_step이 호출한 것:",
    "amp.seen_call": "    호출 {number}: {order}",
    "amp.right.forward_under_autocast": "(주어진 dtype의 torch.autocast 안에서 순전파와 손실)",
    "amp.right.backward_outside_autocast": "(autocast 블록 뒤에 역전파)",
    "amp.right.backward_of_scaled_loss": "(scaler.scale(loss)의 역전파)",
    "amp.right.zero_grad_every_step": "(순전파 전에 optimizer.zero_grad())",
    "amp.right.step_through_scaler": "(scaler.step(optimizer)를 한 번, 기울기가 오버플로하면 스텝을 건너뜀)",
    "amp.right.update_after_step": "(scaler.step(optimizer) 뒤에 scaler.update()를 한 번)",
    "amp.right.unscale_before_clipping": "(scaler.unscale_(optimizer), 그다음 클리핑, 그다음 scaler.step(optimizer))",
    "amp.right.returned_loss": "(언스케일하고 그래프에서 떼어 낸 손실을 돌려줌)",
    "amp.right.any_scaler": "(계약을 따르는 어떤 스케일러로도)",
    "amp.hint.forward_under_autocast":
        "모델의 순전파와 손실을 `with torch.autocast(device_type=device_type, dtype=dtype):` 안에서, "
        "amp_step이 받은 장치 종류와 dtype으로 실행하고, 모델은 float32로 두세요(.half() 금지).",
    "amp.hint.backward_outside_autocast":
        "backward()는 `with torch.autocast(...)` 블록이 끝난 뒤에 호출하세요. 그렇지 않으면 autocast가 "
        "역전파 자체의 행렬 곱까지 다른 정밀도로 바꿉니다(여기서 모델의 역전파에는 행렬 곱이 하나 있습니다).",
    "amp.hint.backward_of_scaled_loss": "backward()는 손실 자체가 아니라 scaler.scale(loss)에 대해 호출하세요.",
    "amp.hint.zero_grad_every_step":
        "amp_step을 시작할 때 optimizer.zero_grad()를 호출해서, 호출마다 스텝이 그 호출의 기울기만 보게 "
        "하세요.",
    "amp.hint.step_through_scaler":
        "스텝은 호출마다 한 번, scaler.step(optimizer)로 하고 optimizer.step()을 직접 부르지 마세요. 기울기에 "
        "inf나 NaN이 있으면 스케일러가 스텝을 건너뜁니다.",
    "amp.hint.update_after_step": "scaler.update()는 호출마다 정확히 한 번, scaler.step(optimizer) 뒤에 호출하세요.",
    "amp.hint.unscale_before_clipping":
        "max_grad_norm이 주어지면 clip_grad_norm_ 전에 scaler.unscale_(optimizer)를 호출하고(그래야 진짜 기울기를 클리핑합니다), 그다음 "
        "scaler.step(optimizer)를 호출하세요.",
    "amp.hint.returned_loss": "이번 호출의 언스케일된 손실을 그래프에서 떼어 낸(loss.detach()) 원소 하나짜리 텐서로 돌려주세요.",
    "amp.hint.any_scaler":
        "amp_step은 계약의 메서드를 가진 어떤 스케일러와도, 위치 인자로든 키워드 인자로든(계약의 파라미터 "
        "이름: model, inputs, targets, loss_fn, optimizer, scaler) 호출되어 동작해야 합니다.",
    "amp.underflow": "여러분의 amp_step과 torch.amp.GradScaler('cpu', growth_interval={interval})로 언더플로 데모(fp16 "
                     "autocast, 목표값 x 1e-4)를 {steps}스텝 학습했습니다",
    "amp.underflow_weight": "{what}. 그런데 학습 뒤 모델의 가중치가 {weight}였습니다. 가중치는 모델 자신의 float32 "
                            "파라미터로 남아 있어야 합니다.",
    "amp.underflow_stalled": "{what}. 스케일링이 없으면 손실이 3e-10 근처에서 멈추고, 있으면 1e-12 아래로 내려가야 "
                             "하는데, 최종 가중치로 계산한 손실은 {final}입니다.",
    "amp.underflow_steps": "{what}. 가중치는 AMP 스텝으로 도달해야 합니다. 각 호출을 앞 호출이 남긴 상태에서 여러분과 같은 "
                           "선택을 하는 amp_step으로 다시 실행해 보았는데, {why}",
    "amp.underflow_raised": "{what}. 호출 {number}에서 {error} 예외가 발생했습니다: {message}\n{trace}",
    "effects.after_call": "호출 {number} 뒤",
    "effects.call": "호출 {number}",
    "effects.none_back": "{where}: 효과가 돌아오지 않았습니다(앞선 호출에서 예외가 발생했습니다)",
    "effects.raised": "호출 {number}에서 {error} 예외가 발생했습니다: {message}\n{trace}",
    "effects.refused": "호출 {number}: torch의 스케일러가 scaler.{call}() 호출을 거부했습니다({error}). 실제 학습 "
                       "루프라면 이 오류로 실행이 끝납니다\n{trace}",
    "effects.should_raise": "이 amp_step의 다른 선택대로라면 호출 {number}은 torch의 스케일러가 scaler.{call}()를 "
                            "거부하며({error}) 끝나야 합니다",
    "effects.but_raised": ". 그런데 {error} 예외가 발생했습니다",
    "effects.but_returned": ". 그런데 정상적으로 반환했습니다",
    "effects.wrong_count": "{where}: 돌아온 효과의 파라미터 수가 맞지 않습니다",
    "effects.mismatch": "{name}의 올바른 값은 {want}인데 실제 값은 {have}입니다",
    "effects.mismatch_worst": "{name}의 올바른 값은 {want}인데 실제 값은 {have}입니다. 가장 많이 다른 원소는 {worst}번: "
                              "기대값 {expected}, 실제 값 {found}",
    "effects.backward_grad": "역전파가 남긴 {name}.grad",
    "effects.parameter": "파라미터 {number}",
    "effects.scaler": "{where}: 스케일러의 (스케일, 성장 추적기, 단계)의 올바른 값은 ({want})인데 실제 값은 ({have})입니다",
    "effects.returned_type": "{where}의 반환값: {kind}. amp_step은 손실을 원소 하나짜리 torch.Tensor로 "
                             "돌려주어야 합니다",
    "effects.returned_size": "{where}의 반환값: 원소 {numel}개짜리 텐서. 손실의 원소는 하나입니다",
    "effects.returned_attached": "{where}의 반환값: 아직 그래프에 연결된 손실. loss.detach()를 돌려주세요",
    "effects.returned_value": "{where}의 반환값: {value}. 하지만 언스케일된 손실은 {expected}입니다",
    "effects.more": "    ... 그리고 {more}개 더",
    "phase.forward": "순전파",
    "phase.loss": "손실",
    "phase.backward": "역전파",
    "order.never_made": "없음(호출이 이루어지지 않았습니다)",
    "order.nothing": "없음",
    "order.autocast": " (autocast {dtype})",
    "order.no_autocast": " (autocast 없음)",
    "order.direct_step": "optimizer.step() 직접 호출",
    "order.scaler_error": "스케일러 오류 ({call}: {error})",
    "explain.ran_under": "모델의 {event} 단계가 autocast {dtype} 안에서 실행되었습니다",
    "explain.ran_without": "모델의 {event} 단계가 autocast 없이 실행되었습니다",
    "explain.backward_inside": "역전파가 torch.autocast 안에서 실행되었습니다.",
    "explain.grad_ratio": "모델 출력에 도달한 기울기가 진짜 기울기의 {ratio}배였습니다(스케일: {scale}).",
    "explain.direct_step": "amp_step이 optimizer.step()을 직접 호출했습니다.",
    "explain.step_twice": "호출 {number}에서 scaler.step(optimizer)를 {count}번 호출했습니다. torch의 스케일러는 두 번째 호출을 "
                          "거부하며(\"step() has already been called since the last update()\"), 그 오류로 호출이 "
                          "끝납니다.",
    "explain.updates": "호출 {number}에서 scaler.update()를 {count}번 호출했습니다",
    "explain.updates_before_step": ". scaler.step(optimizer)보다 먼저 호출했습니다.",
    "explain.updates_end": ".",
    "explain.update_twice": " torch의 스케일러는 두 번째 호출을 거부하며(\"No inf checks were recorded prior to "
                            "update.\"), 그 오류로 호출이 끝납니다.",
    "explain.no_unscale": "amp_step이 scaler.unscale_(optimizer)를 한 번도 호출하지 않았습니다.",
    "explain.clip_before_unscale": "호출 {number}에서 scaler.unscale_(optimizer)보다 먼저 clip_grad_norm_을 호출했습니다. "
                                   "스케일된 기울기를 클리핑한 것입니다.",
    "explain.unscale_twice": "호출 {number}에서 scaler.unscale_(optimizer)를 {count}번 호출했습니다. torch의 스케일러는 두 번째 "
                             "호출을 거부합니다(\"unscale_() has already been called on this optimizer since the last "
                             "update()\"). scaler.step(optimizer)는 따로 unscale_가 필요 없습니다. 아직 언스케일되지 "
                             "않은 기울기만 언스케일합니다.",
    "explain.unscale_after_step": "호출 {number}에서 scaler.step(optimizer) 뒤에 scaler.unscale_(optimizer)를 호출했습니다. "
                                  "torch의 스케일러는 이를 거부하며(\"unscale_() is being called after step()\"), "
                                  "스텝 뒤의 클리핑은 어차피 너무 늦습니다.",
    "gpu.measured": "채점기가 여러분의 프로세스 밖에서 잰 값: 호출마다 왕복에 걸린 실제 시간(새 시드로 학습 스텝 {steps}번, "
                    "데이터와 모델 만들기, 가중치 복사 포함)과, 복사해 낸 가중치로 채점기 자체의 평가 배치(예제 "
                    "{rows}개, 채점기의 CPU에서 float32로 계산)에서 계산한 손실. float32 실행에서는 TF32를 끕니다.",
    "gpu.run": "실행 {number}: float32 {seconds}, 손실 {loss} (학습 전 {initial})",
    "gpu.run_amp": "; AMP {seconds}, 손실 {loss}",
    "gpu.speedup": "float32의 손실에 도달하는 속도 향상(왕복 시간의 중앙값): {speedup}배 ",
    "gpu.dry": "(CPU의 드라이 모드: 검사하지 않음)",
    "gpu.required": "(필요: {minimum}배 이상)",
    "gpu.trained": "은닉층 {depth}개짜리 MLP(너비 {width}, 배치 {batch})를 {device}에서 다음 호출로 {steps}스텝씩 "
                   "{repeats}번 학습했습니다(매번 새 시드로, {warmup}스텝 워밍업 뒤):\n    {call}\n",
    "gpu.not_parameters": "{what}그런데 학습 뒤 {weights}. 채점기는 모델의 파라미터로 손실을 계산하므로, 파라미터는 "
                          "평범한 float32 torch.nn.Parameter 객체로 남아 있어야 합니다.",
    "gpu.loss": "{what}실행 {number}에서 여러분의 프로세스가 복사해 낸 가중치로 채점기가 계산한 학습된 모델의 손실은 "
                "{loss}입니다. 같은 {steps}스텝을 float32로 학습하면 {loss32}에 도달합니다(허용: {allowed}까지. 학습 "
                "전 {initial}). 옵티마이저가 호출마다 한 번, 기울기를 먼저 초기화한 뒤 스케일러를 통해 스텝하나요?"
                "\n\n{summary}",
    "gpu.not_trained": "{what}실행 {number}에서 학습된 가중치가 같은 {steps}스텝을 float32로 학습했을 때의 가중치에서 "
                       "{distance}만큼 떨어져 있습니다(학습이 가중치를 옮긴 거리에 대한 비율. AMP의 반올림 차이는 "
                       "{allowed}보다 훨씬 작습니다). 가중치는 amp_step이 받은 배치로 호출마다 옵티마이저 스텝을 한 번씩 "
                       "해서 나와야 합니다.\n\n{summary}",
    "gpu.slow": "{what}여러분의 amp_step으로 한 실행이 float32보다 {speedup}배 적은 실제 시간이 걸렸습니다(채점기가 "
                "여러분의 프로세스 밖에서 잰 왕복 시간의 중앙값). GPU에서는 {minimum}배 이상이어야 합니다. 순전파와 "
                "손실이 torch.autocast(device_type='cuda', dtype=torch.float16) 안에 있나요? amp_step이 호출마다 "
                "GPU와 동기화(loss.item(), float(loss), 출력)하지 않나요?\n\n{summary}",
    "gpu.underflow": "여러분의 amp_step과 torch.amp.GradScaler({kind_repr}, growth_interval=20)로 언더플로 과제(목표값 "
                     "x 1e-4로의 선형 회귀, {kind}에서 float16 autocast)를 {steps}스텝 학습했습니다",
    "gpu.underflow_weight": "{what}. 그런데 학습 뒤 모델의 가중치가 평범한 float32 파라미터가 아니었습니다({weight}). "
                            "채점기는 그 가중치로 손실을 계산합니다.",
    "gpu.underflow_stalled": "{what}. 채점기가 (여러분의 프로세스에서 복사해 낸) 모델의 최종 가중치로 과제의 예제 "
                             "{n}개에 대한 float32 평균 제곱 오차를 계산했습니다: {final}. 스케일러가 없으면 float16 "
                             "기울기가 0으로 언더플로하여 손실이 {unscaled}에서 멈추고, 스케일러로 스케일한 역전파라면 "
                             "1e-12 아래로 내려가야 합니다. backward()는 scaler.scale(loss)에 대해 호출하고, 스텝은 "
                             "scaler.step(optimizer)로 하세요.",
    "gpu.underflow_no_steps": "{what}. 그런데 여러분의 프로세스가 {steps}스텝 각각의 뒤에 가중치를 복사해 내지 "
                              "않았습니다(하네스를 바꾸지 않았다면 하네스가 복사합니다). 채점기는 모든 스텝을 다시 "
                              "계산합니다.",
    "gpu.underflow_not_amp": "{what}. 그런데 스텝 {step} 뒤의 가중치가 그 전 가중치에서 amp_step이 받은 데이터로 한 AMP "
                             "스텝으로 나오지 않습니다(채점기가 그 스텝을 다시 계산했습니다: 스케일한 손실의 float16 "
                             "autocast 기울기를 언스케일하여 옵티마이저 스텝 한 번). 호출마다 그런 스텝을 한 번 "
                             "해야 하며(기울기가 오버플로하면 건너뜀), 가중치를 모델에 직접 써 넣으면 점수를 얻지 "
                             "못합니다.",
    "gpu.scaler": "모든 파라미터, 기울기, 스케일한 텐서가 {kind}에 있을 때(아래의 각 텐서에 device={kind}를 더하세요) "
                  "여러분의 스케일러는 torch.amp.GradScaler({kind})와 똑같이 동작해야 합니다. 스케일, 추적기, 건너뛴 "
                  "스텝이 같아야 하고(2의 거듭제곱 계수에서는 정확히, 그 밖에는 1e-6까지), 파라미터는 1e-6까지 같아야 "
                  "합니다.",
    "file.missing": "{file} 파일이 없습니다. 제출물의 최상위에 올리세요.",
    "file.not_utf8": "{file}는 올바른 UTF-8 텍스트가 아닙니다(바이트 {byte}). UTF-8로 저장하세요.",
    "file.syntax": "{file}의 {line}번째 줄에 문법 오류가 있습니다: {message}",
    "file.import_raised": "{file}를 import하는 중에 예외가 발생했습니다:\n{frames}",
    "file.undefined": "{file}에 `{name}`의 정의가 없습니다.",
    "scenario.stopped": "{error}: {message} 때문에 시나리오가 멈췄습니다",
    "refused.task1": "{what}: loss_scaler.py가 실행되는 동안에는 쓸 수 없습니다. 과제 1은 손실 스케일러를 직접 "
                     "작성하는 과제입니다(과제 안내서의 \"코드에서 쓸 수 없는 것\" 참고)",
    "process.ended": "이 호출 중에 여러분의 코드를 실행하던 프로세스가 끝났습니다(종료 또는 충돌)",
    "mistake.line": "예상되는 실수: {words} 때 이런 결과가 나옵니다.",
    "mistake.or": ", 또는 ",
    "mistake.section": "예상되는 실수",
}

#: Each catalogued mistake's words, by language: they complete "Likely mistake: this is what happens when ..."
#: ("예상되는 실수: <words> 때 ...") for every bug of tests/catalogue/catalogue.py.  Looked up by bug name when the line
#: is rendered (checks.judge.diagnose.described), never copied into a diagnosis table: words are not behaviour, so
#: editing them rebuilds no table (autograder.engine.fingerprint leaves this assignment out).  A bug with no words in
#: a language reads as English.  The words describe the mistake, never the hidden inputs that reveal it.
MISTAKES: dict[str, dict[str, str]] = {
    "en": {
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
        "div_by_scale_tensor": "unscale_() divides the gradients by the scale instead of multiplying them by its reciprocal rounded to float32",
        "unscale_in_float64": "unscale_() multiplies the gradients by the float64 reciprocal instead of the reciprocal rounded to float32",
        "growth_at_or_above_interval": "update() grows once the tracker is at or above growth_interval (>=) instead of when it reaches it (==)",
        "load_state_dict_clamps_tracker": "load_state_dict() clamps a restored growth tracker below growth_interval",
        "new_scale_tensor_ignored": "update(new_scale) sets the scale only for a Python float, not for a one-element tensor",
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
        "scale_not_nested": "scale() scales the items of a list or tuple but does not recurse into nested ones",
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
    },
    "ko": {
        "growth_off_by_one": "이번 깨끗한 스텝을 세기 전에 추적기를 growth_interval과 비교해서 스케일이 깨끗한 스텝 하나만큼 "
                             "늦게 성장할",
        "tracker_not_reset_on_backoff": "스케일이 백오프할 때 성장 추적기를 0으로 초기화하지 않을",
        "tracker_not_reset_after_growth": "스케일이 성장한 뒤 성장 추적기를 초기화하지 않을",
        "tracker_counts_skipped_steps": "update()가 건너뛴(오버플로한) 스텝도 성장 쪽으로 셀",
        "backoff_divides": "스케일에 backoff_factor를 곱하지 않고 나눌",
        "growth_to_inf": "성장한 스케일이 float32를 넘어 inf가 되어도 그대로 둘",
        "new_scale_resets_tracker": "update(new_scale)이 성장 추적기까지 초기화할",
        "backoff_per_overflowing_grad": "update()마다 한 번이 아니라 오버플로한 기울기마다 한 번씩 백오프할",
        "backoff_per_overflowing_optimizer": "update()마다 한 번이 아니라 오버플로한 옵티마이저마다 한 번씩 백오프할",
        "no_float32_rounding": "스케일을 float32로 반올림하지 않고 파이썬(float64) 곱 그대로 둘",
        "new_scale_keeps_optimizer_state": "update(new_scale)이 옵티마이저별 상태를 지우기 전에 반환할",
        "init_scale_not_rounded": "init_scale을 float32로 반올림하지 않고 받은 그대로 둘",
        "wrong_default_interval": "growth_interval의 기본값이 torch의 2000과 다를",
        "nan_ignored": "inf만 찾아서 NaN 기울기를 감지하지 못할",
        "only_last_grad_checked": "반복문에서 found_inf를 덮어써서 마지막 기울기만 반영될",
        "only_first_grad_checked": "첫 번째 기울기만 inf/NaN을 검사할",
        "only_first_param_group": "옵티마이저의 첫 번째 파라미터 그룹만 언스케일하고 검사할",
        "crash_on_none_grads": ".grad가 None인 파라미터를 건너뛰지 않을",
        "checks_inf_after_unscale": "inf/NaN을 언스케일하기 전이 아니라 뒤에 찾을",
        "inf_check_via_sum": "각 기울기의 합으로 inf/NaN을 감지할(유한한 값의 합도 오버플로할 수 있음)",
        "unscale_multiplies_by_scale": "unscale_()가 기울기에 스케일의 역수가 아니라 스케일을 곱할",
        "div_by_scale_tensor": "unscale_()가 기울기에 float32로 반올림한 스케일의 역수를 곱하지 않고 스케일로 나눌",
        "unscale_in_float64": "unscale_()가 기울기에 float32로 반올림한 역수가 아니라 float64 역수를 곱할",
        "growth_at_or_above_interval": "update()가 추적기가 growth_interval에 이를 때(==)가 아니라 그 이상일 때(>=) 성장할",
        "load_state_dict_clamps_tracker": "load_state_dict()가 복원한 성장 추적기를 growth_interval 아래로 잘라 낼",
        "new_scale_tensor_ignored": "update(new_scale)이 Python float일 때만 스케일을 정하고 원소 하나짜리 텐서는 무시할",
        "unscale_not_in_place": "unscale_()가 각 .grad를 제자리에서 바꾸지 않고 새 텐서로 바꿔 끼울",
        "step_unscales_twice": "명시적인 unscale_() 뒤에 step()이 다시 언스케일할",
        "double_unscale_no_error": "같은 반복에서 두 번째 unscale_()가 오류를 발생시키지 않고 다시 언스케일할",
        "update_without_step_no_error": "지난 update() 이후 step()이나 unscale_() 없이 호출한 update()가 오류를 발생시키지 "
                                        "않을",
        "step_returns_none": "step()이 optimizer.step()의 반환값을 돌려주지 않을",
        "steps_on_inf": "기울기가 inf나 NaN이어도 step()이 optimizer.step()을 호출할",
        "step_ignores_unscale_inf": "명시적인 unscale_()가 찾은 inf/NaN을 step()이 무시하고 스텝할",
        "state_never_cleared": "update()가 옵티마이저별 상태를 지우지 않을",
        "update_looks_at_last_optimizer": "update()가 마지막으로 스텝한 옵티마이저만 볼",
        "float16_grads_not_rejected": "unscale_()가 ValueError를 발생시키지 않고 float16 기울기를 받아들일",
        "scale_python_float": "scale()이 파이썬 float를 곱해서 float16 손실이 float16으로 남을",
        "scale_tuple_becomes_list": "scale()이 tuple을 받았는데 list를 돌려줄",
        "scale_not_nested": "scale()이 list나 tuple의 항목은 스케일하지만 중첩된 컨테이너 안으로 재귀하지 않을",
        "load_state_dict_drops_tracker": "load_state_dict()가 성장 추적기를 복원하지 않을",
        "state_dict_wrong_key": "state_dict()가 추적기의 키를 torch의 '_growth_tracker'와 다르게 부를",
        "constructor_accepts_growth_factor_one": "생성자가 growth_factor == 1을 받아들일",
        "backward_inside_autocast": "backward()를 autocast 블록 안에서 호출할",
        "no_zero_grad": "기울기를 한 번도 초기화하지 않아 호출마다 쌓일",
        "zero_grad_after_backward": "backward() 뒤에 기울기를 초기화해서 스텝이 기울기를 보지 못할",
        "optimizer_step_direct": "scaler.step(optimizer) 대신 optimizer.step()을 호출할",
        "unscale_then_optimizer_step": "기울기를 언스케일한 뒤 optimizer.step()을 직접 호출할",
        "update_before_step": "scaler.update()를 scaler.step(optimizer)보다 먼저 호출할",
        "no_update": "scaler.update()를 한 번도 호출하지 않을",
        "clip_before_unscale": "기울기를 언스케일하기 전에 클리핑할",
        "clip_without_unscale": "scaler.unscale_()를 먼저 호출하지 않고 기울기를 클리핑할",
        "model_half": "autocast 안에서 실행하지 않고 모델을 .half()로 변환할",
        "unscaled_backward": "스케일하지 않은 손실에 대해 backward()를 호출할",
        "no_autocast": "순전파와 손실을 autocast 없이 실행할",
        "hardcoded_cuda": "autocast의 device_type을 \"cuda\"로 고정해 둘",
        "hardcoded_dtype": "autocast의 dtype을 float16으로 고정해 둘",
        "renamed_parameter": "amp_step의 파라미터 이름이 계약과 다를",
        "uses_gradscaler_internals": "amp_step이 torch.amp.GradScaler의 비공개 속성을 읽을",
        "returns_scaled_loss": "amp_step이 스케일된 손실을 돌려줄",
        "returns_attached_loss": "amp_step이 그래프에서 떼어 내지 않은(detach하지 않은) 손실을 돌려줄",
        "returns_python_float": "amp_step이 텐서 대신 loss.item()을 돌려줄",
        "early_return_on_overflow": "기울기가 오버플로할 때마다 스텝과 함께 scaler.update()도 건너뛰어서 스케일이 "
                                    "백오프하지 않을",
        "update_only_after_clean_step": "기울기가 유한할 때만 scaler.update()를 호출해서, 건너뛴 스텝 뒤에 스케일러가 "
                                        "갱신되지 않고 다음 스텝을 거부할",
        "unscale_twice": "scaler.step(optimizer) 전에 scaler.unscale_()를 한 번 더 호출해서 torch의 스케일러가 거부할",
        "unscale_after_step": "scaler.step(optimizer) 뒤에 scaler.unscale_()와 클리핑을 해서 torch의 스케일러가 거부할",
        "update_called_twice": "한 반복에서 scaler.step(optimizer) 뒤에 scaler.update()를 두 번 호출할",
        "step_called_twice": "한 반복에서 scaler.update() 전에 scaler.step(optimizer)를 두 번 호출할",
        "unscale_before_backward": "backward() 전에 scaler.unscale_()를 호출해서 나중에 클리핑하는 기울기가 여전히 스케일된 "
                                   "상태일",
        "delegate_subclass": "ToyLossScaler가 torch.amp.GradScaler를 상속할",
        "delegate_wrapper": "ToyLossScaler가 torch.amp.GradScaler를 감싸서 쓸",
        "delegate_kernels": "ToyLossScaler가 torch의 비공개 AMP 커널을 호출할",
        "delegate_obfuscated": "ToyLossScaler가 간접적으로 torch.amp.GradScaler에 접근할",
        "quick_check_backward_inside": "확인 문제 Q2의 답이 backward()를 autocast 안에 둘",
        "quick_check_wrong_and_skipped": "확인 문제의 답을 건너뛰거나 틀릴",
        "quick_check_not_letters": "확인 문제의 답을 글자로 주지 않을",
    },
}

TABLES: dict[str, dict[str, str]] = {"en": EN, "ko": KO}
LANGUAGES = tuple(TABLES)
#: Fields only English grammar needs (an "s" for a plural): another language's message may leave them out; any
#: other field it has, leaves out or adds fails a test.
ENGLISH_ONLY_FIELDS = frozenset({"plural"})


def requested() -> str:
    """The language ``$AMP_LANGUAGE`` asks for, "" when none: the one reading of the setting (the grader's
    ``autograder.settings.language`` is this, and refuses a language it does not know)."""
    return os.environ.get(ENV, "").strip()


def language() -> str:
    """The language of the checks' messages now: ``$AMP_LANGUAGE`` when the table has it, else English."""
    chosen = requested()
    return chosen if chosen in TABLES else DEFAULT


def template(key: str, code: str = "", tables: dict[str, dict[str, str]] = TABLES) -> str:
    """The template of ``key`` in language ``code`` (the current one by default) of ``tables`` (these, or the
    grader's own, by language); the English one where that language has none yet, so that a new message may land in
    English only (tests list what is untranslated)."""
    return tables.get(code or language(), tables[DEFAULT]).get(key) or tables[DEFAULT][key]


def say(key: str, **fields: Any) -> str:
    """The message ``key`` in the current language, with ``fields`` filled in."""
    return template(key).format(**fields)


def placeholders(text: str) -> set[str]:
    """The fields a template fills (``{name}``)."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def telling_words(text: str) -> str:
    """The longest fixed text between the fields of template ``text``'s first line: what every message made from it
    holds, and the part least likely to occur in another message (to recognise it in results)."""
    pieces = re.split(r"\{[^{}]*\}", text.split("\n", 1)[0])
    return max((piece.strip() for piece in pieces), key=len)


def phrases(key: str) -> tuple[str, ...]:
    """The message ``key``'s telling words (:func:`telling_words`) in every language (to recognise it in results)."""
    return tuple(dict.fromkeys(telling_words(template(key, code)) for code in TABLES))


#: The messages a ``@given`` test writes out in English, with their fields (hypothesis seeds a test's examples from
#: its source, so rewording it there would change the inputs tried); :func:`localised` knows each by its text.
WRITTEN_OUT = (("what.scale", {}), ("what.unscale", {}), ("gpu.scaler", {"kind": "'cpu'"}),
               ("gpu.scaler", {"kind": "'cuda'"}))
_WRITTEN_OUT_TEXTS = {EN[key].format(**fields): (key, fields) for key, fields in WRITTEN_OUT}


def localised(english_text: str) -> str:
    """``english_text``, one of the :data:`WRITTEN_OUT` messages, in the current language (any other text stays)."""
    found = _WRITTEN_OUT_TEXTS.get(english_text)
    return say(found[0], **found[1]) if found else english_text


# --------------------------------------------------------------------------- what the student processes say
#
# A student process speaks English (:func:`english`): its answers are compared, digest against digest, with the
# reference's and the catalogued mistakes' answers, which must not depend on the language.  Each message it makes
# is a :class:`Spoken`: its English text carrying the record it is rendered from, its id and fields; the process
# sends the record beside the text (a fault's "said", an error record's "said"), and the judge renders it in the
# run's language where the text stands (:func:`render`).  Nothing is looked up by its English words.

#: The messages a student process says: the only ids a record may name.
STUDENT_PROCESS = ("file.missing", "file.not_utf8", "file.syntax", "file.import_raised", "file.undefined",
                   "refused.task1", "scenario.stopped")
#: A record's text (a field, or what stands before a message it ends with) is at most this long, and nests at most
#: this deep (a refusal in an import's traceback is 3).
FIELD_LIMIT, DEPTH_LIMIT = 4000, 4


class Spoken(str):
    """A student process's message, its English text, with :attr:`record`: ``{"id", "fields"}`` (each field a
    string or a record), or ``{"text", "then"}`` for a text that ends with a message (a traceback ending in a
    refusal).  Any operation on it gives a plain ``str``: only the text a message was made as carries its record."""

    record: Any

    @classmethod
    def of(cls, text: str, record: Any) -> "Spoken":
        spoken = cls(text)
        spoken.record = record
        return spoken


def english(key: str, **fields: Any) -> Spoken:
    """The message ``key`` in English, whatever the language, with its record: for the student processes.  A field
    longer than FIELD_LIMIT is recorded cut short (a deep traceback), the message's text whole."""
    record = {"id": key, "fields": {name: _recorded(value) for name, value in fields.items()}}
    return Spoken.of(EN[key].format(**{name: str(value) for name, value in fields.items()}), record)


def _recorded(value: Any) -> Any:
    return value.record if isinstance(value, Spoken) else str(value)[:FIELD_LIMIT]


def ending_with(text: str, message: Any) -> str:
    """``text``, which ends with ``message``: a :class:`Spoken` rendered with that end in any language when the
    message is one (an exception's message at the end of its traceback), else the plain text."""
    if isinstance(message, Spoken) and message and text.endswith(message):
        return Spoken.of(text, {"text": text[:len(text) - len(message)][-FIELD_LIMIT:], "then": message.record})
    return text


def record_of(said: Any) -> Any:
    """The record of ``said`` (a :class:`Spoken`, or an exception raised with one as its only argument), else None."""
    if isinstance(said, BaseException):
        said = said.args[0] if len(said.args) == 1 else None
    return said.record if isinstance(said, Spoken) else None


def render(record: Any, depth: int = 0) -> str | None:
    """A record (:class:`Spoken`) rendered in the current language, or None unless it is valid: ids of the student
    processes' messages with exactly their templates' fields, texts within FIELD_LIMIT, nested within DEPTH_LIMIT
    (what a student process sends is untrusted)."""
    if isinstance(record, str):
        return record if len(record) <= FIELD_LIMIT else None
    if depth >= DEPTH_LIMIT or not isinstance(record, dict):
        return None
    if set(record) == {"text", "then"}:
        head, then = render(record["text"], depth + 1), render(record["then"], depth + 1)
        return None if head is None or then is None or not isinstance(record["then"], dict) else head + then
    key, fields = record.get("id"), record.get("fields")
    if set(record) != {"id", "fields"} or key not in STUDENT_PROCESS or not isinstance(fields, dict) \
            or set(fields) != placeholders(EN[key]):
        return None
    values = {name: render(value, depth + 1) for name, value in fields.items()}
    return None if None in values.values() else say(key, **values)


def shown(text: Any, record: Any = None) -> str:
    """``text`` as the student reads it: rendered from ``record`` (or, by default, from the record ``text`` carries:
    a :class:`Spoken`, an exception raised with one) in the current language; in English, or without a valid
    record, the text itself, byte for byte."""
    record = record_of(text) if record is None else record
    rendered = render(record) if isinstance(record, dict) and language() != DEFAULT else None
    return str(text) if rendered is None else rendered


def quoted(error: dict[str, Any]) -> dict[str, Any]:
    """An error record's ``error``, ``message`` and ``trace`` as a message quotes them: a student process's message
    (its record, "said") rendered in the current language, as the message and where the trace ends with it."""
    message, trace = error.get("message"), error.get("trace", "")
    if isinstance(message, str) and error.get("said") is not None:
        rendered = shown(message, error["said"])
        if message and isinstance(trace, str) and trace.endswith(message):
            trace = trace[:len(trace) - len(message)] + rendered
        message = rendered
    return {"error": error.get("type"), "message": message, "trace": trace}


def error_text(error: dict[str, Any]) -> str:
    """``Type: message`` of an error record, its message as :func:`quoted` renders it."""
    fields = quoted(error)
    return f"{fields['error']}: {fields['message']}"


def mistake(bug: str) -> str:
    """A catalogued mistake's words (:data:`MISTAKES`) in the current language, else in English, else its name."""
    return MISTAKES.get(language(), {}).get(bug) or MISTAKES[DEFAULT].get(bug) or bug.replace("_", " ")
