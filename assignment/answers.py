"""Task 3: Quick Check.  Answer each question with the letter of one choice, e.g. ``Q1 = "B"``.

Leave ``...`` for a question you skip.  The questions are repeated in README.md.

Q1. You turned on ``torch.autocast`` with float16, but tiny gradients keep
    vanishing and the loss stops improving.  Which tool fixes that?
    A. ``torch.no_grad()``    B. a loss scaler such as ``torch.amp.GradScaler``
    C. ``model.half()``       D. a larger batch size

Q2. Which part of a training iteration belongs inside the ``torch.autocast`` block?
    A. the forward pass only          B. the forward pass and the loss
    C. forward, loss and backward     D. the optimizer step

Q3. You clip gradients with ``clip_grad_norm_`` in an AMP loop.  What must happen
    just before clipping?
    A. ``scaler.update()``            B. ``scaler.unscale_(optimizer)``
    C. ``optimizer.zero_grad()``      D. nothing: clipping works on scaled gradients

Q4. ``scaler.step(optimizer)`` finds an inf in a gradient.  What happens?
    A. the step is skipped, and the next ``update()`` shrinks the scale
    B. the step runs with the inf replaced by zero
    C. training stops with an error
    D. the step runs, and the scale grows

Q5. You train with ``dtype=torch.bfloat16`` autocast.  Do you need a loss scaler?
    A. yes, bfloat16 underflows sooner than float16
    B. usually not: bfloat16 has float32's exponent range
    C. yes, or autocast refuses to run
    D. only on CPU
"""

Q1 = ...
Q2 = ...
Q3 = ...
Q4 = ...
Q5 = ...
