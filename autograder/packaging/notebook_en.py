"""The English notebook edition's own cells: what ``amp_homework.ipynb`` says besides the handout's sections, and
its code cells.

:mod:`autograder.packaging.notebook_build` assembles them with the handout's lesson and task statements; the
Korean edition's texts are :mod:`autograder.packaging.notebook_ko` (same names).  The code cells are the same in
both editions but for what they print, plot and say in comments: each such text is a ``«key»`` in the cell, filled
from the edition's :data:`CODE_TEXTS` (English here, Korean there, keyed alike).
"""

ASSIGNMENT_CONFIG = """\
# ASSIGNMENT CONFIG
name: amp_homework
init_cell: true
check_all_cell: false
run_tests: false
generate: false
solutions_pdf: false
template_pdf: false
tests:
  files: false
  ok_format: false
export_cell:
  pdf: false
  run_tests: false
  ignore_log: true
  files:
    - loss_scaler.py
    - amp_step.py
    - answers.py
  instructions: >-
    Submit the zip file this cell makes (it holds loss_scaler.py, amp_step.py and answers.py as your
    %%writefile cells last wrote them: run every task cell first), or upload those three .py files.
"""


INTRO = """\
**The notebook edition.** Everything here is also in `README.md`; this notebook adds runnable
cells. Open it *in the assignment folder*, next to `checks/`, `underflow_demo.py` and `README.md`
(on a hosted notebook, upload and unzip the whole folder first). You need
`pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu`, then
`pip install pytest==9.2.0 hypothesis==6.168.5 matplotlib otter-grader==7.0.0`.

How it works:

* Each task cell starts with `%%writefile loss_scaler.py` (or `amp_step.py`, `answers.py`):
  running the cell **writes your code to that file**. The files are what gets graded, by the same
  autograder as students who edit the `.py` files directly. Re-run a task cell after every change.
* `grader.check("q_scaler")` (and friends) runs the **public checks** from `checks/` on those files,
  like `python -m pytest` in this folder. The autograder also runs **hidden tests**.
* To submit, run the last cell and upload the zip it makes (or the three `.py` files).
"""


DTYPES_MD = """\
### Try it: which dtype does autocast pick?

The cell below runs a few operations inside `torch.autocast` and prints the dtype of each result.
On CPU (`bfloat16` or `float16`) only the matrix products go 16-bit and the losses stay `float32`;
other ops keep their input's dtype. On CUDA, `softmax`, `sum` and `layer_norm` run in `float32` too:
each backend has its own lists. Parameters and inputs stay `float32` throughout.
"""


DTYPES_CODE = """\
import torch
import torch.nn.functional as F


def autocast_dtypes(device_type, dtype):
    \"\"\"The dtype of each operation's result inside torch.autocast(device_type, dtype).\"\"\"
    x = torch.randn(8, 16, device=device_type)       # float32 input
    w = torch.randn(4, 16, device=device_type)       # float32 "weight"
    t = torch.randn(8, 4, device=device_type)        # float32 target
    labels = torch.zeros(8, dtype=torch.long, device=device_type)
    ops = {
        "F.linear(x, w)": lambda: F.linear(x, w),
        "x @ w.T": lambda: x @ w.T,
        "F.relu(h)": lambda: F.relu(F.linear(x, w)),
        "torch.softmax(h, 1)": lambda: torch.softmax(F.linear(x, w), 1),
        "h.sum()": lambda: F.linear(x, w).sum(),
        "F.layer_norm(h, (4,))": lambda: F.layer_norm(F.linear(x, w), (4,)),
        "F.mse_loss(h, t)": lambda: F.mse_loss(F.linear(x, w), t),
        "F.cross_entropy(h, labels)": lambda: F.cross_entropy(F.linear(x, w), labels),
        "torch.cat([h, t])": lambda: torch.cat([F.linear(x, w), t]),
    }
    with torch.autocast(device_type=device_type, dtype=dtype):
        return {name: str(op().dtype).replace("torch.", "") for name, op in ops.items()}


settings = [("cpu", torch.bfloat16), ("cpu", torch.float16)]
if torch.cuda.is_available():
    settings.append(("cuda", torch.float16))
columns = {f"{device} {str(dtype).replace('torch.', '')}": autocast_dtypes(device, dtype)
           for device, dtype in settings}
print(f"{'«dtypes.operation»':32}" + "".join(f"{name:>16}" for name in columns))
for op in next(iter(columns.values())):
    print(f"{op:32}" + "".join(f"{column[op]:>16}" for column in columns.values()))
"""


DEMO_MD = """\
### Try it: silent gradient underflow

`underflow_demo.py` trains a linear regression with tiny targets under float16 autocast, once
without and once with loss scaling (`torch.amp.GradScaler`). Without scaling, the gradient
underflows to exactly zero and the loss freezes; with it, the loss keeps falling.
"""


DEMO_CODE = """\
from underflow_demo import run_demo

plain = run_demo(200, use_scaler=False)
scaled = run_demo(200, use_scaler=True)
print(f"«demo.header»")
for step in (0, 10, 25, 33, 50, 100, 199):
    print(f"{step:>5} | {plain.losses[step]:>15.3e} | {scaled.losses[step]:>13.3e} | {scaled.scales[step]:>9.0f}")
print(f"«demo.zero»")

try:
    import matplotlib.pyplot as plt
except ImportError:
    print("«demo.no_matplotlib»")
else:
«demo.fonts»    fig, ax = plt.subplots(figsize=(7, 4))
    ax.semilogy(plain.losses, label="«demo.label_plain»")
    ax.semilogy(scaled.losses, label="fp16 autocast + torch.amp.GradScaler")
    if plain.first_zero_grad_step is not None:
        ax.axvline(plain.first_zero_grad_step, color="grey", linestyle=":", label="«demo.label_zero»")
    ax.set(xlabel="«demo.xlabel»", ylabel="«demo.ylabel»", title="«demo.title»")
    ax.legend()
    plt.show()
"""


LOAD_HELPER = """\
import importlib.util
«load.os»import sys
«load.language»

def load_mine(name):
    \"\"\"«load.doc»\"\"\"
    spec = importlib.util.spec_from_file_location(f"mine_{name}", f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
"""


MINE_MD = """\
### Try it: your scaler and `amp_step` on the underflow problem

Once Tasks 1 and 2 pass their checks, the same demo with *your* `ToyLossScaler` and `amp_step`
should recover like torch's `GradScaler` does.
"""


MINE_CODE = """\
try:
    ToyLossScaler = load_mine("loss_scaler").ToyLossScaler
    my_amp_step = load_mine("amp_step").amp_step
    mine = run_demo(200, use_scaler=True, scaler_factory=lambda: ToyLossScaler(growth_interval=20),
                    step_fn=my_amp_step)
except NotImplementedError as exc:
    print(f"«mine.not_yet»")
else:
    print(f"«mine.final»"
          f"«mine.final_mine»")
"""


GPU_MD = """\
### On a GPU: is AMP faster?

Where CUDA exists (for example on a hosted notebook GPU), this cell times a training step of a
large MLP in plain float32 against your `amp_step` with `torch.amp.GradScaler("cuda")` and
float16 autocast. On a GPU with tensor cores, expect AMP to be clearly faster. Staff grade the GPU
part with the same kind of measurement; on a CPU-only machine the cell just says so.
"""


GPU_CODE = """\
import time

import torch


def seconds_per_step(step, steps=20, warmup=5):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / steps


if not torch.cuda.is_available():
    print("«gpu.skipped»")
else:
    my_amp_step = load_mine("amp_step").amp_step
    torch.backends.cuda.matmul.allow_tf32 = False  # «gpu.baseline»
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    width, batch = 4096, 4096
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(batch, width, device="cuda")
    y = torch.randn(batch, width, device="cuda")
    loss_fn = torch.nn.functional.mse_loss

    def fp32_step():
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()

    scaler = torch.amp.GradScaler("cuda")

    def amp_step_once():
        my_amp_step(model, x, y, loss_fn, optimizer, scaler, device_type="cuda", dtype=torch.float16)

    fp32 = seconds_per_step(fp32_step)
    amp = seconds_per_step(amp_step_once)
    print(f"«gpu.fp32»"
          f"«gpu.amp»")
"""


#: What the code cells print, plot and say in comments, by key (each ``«key»`` of a cell).
CODE_TEXTS = {
    # the install cell (notebook_build.install_source)
    "install.comment":
        "# Run this cell first: it installs what this notebook needs, at the grader's versions\n"
        "# (torch's CPU build), unless it is installed already.",
    # the helper that imports the student's files (the Korean edition asks for Korean messages there)
    "load.os": "",
    "load.language": "",
    "load.doc": "Import the file your %%writefile cell wrote (name.py), fresh: re-running a cell changes it.",
    # which dtype autocast picks
    "dtypes.operation": "operation (h = F.linear(x, w))",
    # the underflow demo
    "demo.header": "{'step':>5} | {'loss, no scaler':>15} | {'loss, scaler':>13} | {'scale':>9}",
    "demo.zero": "Without scaling the weight gradient is exactly zero from step {plain.first_zero_grad_step} on.",
    "demo.no_matplotlib": "(pip install matplotlib to see the loss curves)",
    "demo.fonts": "",
    "demo.label_plain": "fp16 autocast, no loss scaling",
    "demo.label_zero": "gradient underflows to 0",
    "demo.xlabel": "step",
    "demo.ylabel": "MSE loss (log scale)",
    "demo.title": "float16 gradient underflow",
    # your scaler and amp_step on the demo
    "mine.not_yet": "Not yet: {exc}",
    "mine.final": "final loss: no scaler {plain.final_loss:.2e}, torch's GradScaler {scaled.final_loss:.2e}, ",
    "mine.final_mine": "your ToyLossScaler + amp_step {mine.final_loss:.2e}",
    # AMP on a GPU
    "gpu.skipped": "No CUDA GPU here: skipped. Run this notebook on a GPU machine to time fp32 against AMP.",
    "gpu.baseline": "plain float32 matmuls for the baseline",
    "gpu.fp32": "{torch.cuda.get_device_name()}: fp32 {fp32 * 1e3:.1f} ms/step, ",
    "gpu.amp": "AMP with your amp_step {amp * 1e3:.1f} ms/step: {fp32 / amp:.2f}x faster",
}
