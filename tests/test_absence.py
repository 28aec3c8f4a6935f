"""Task 1's rule by absence (assignment/checks/student/absence.py): where loss_scaler.py runs, torch's scaler is gone.

Each test runs a fresh interpreter that loads what a grader's student process loads (torch, the
harness, the probes), takes the scaler out as the zygote's child does, and then tries, with every
power plain Python has, to get a working scaler back.  Removal is process-wide and for good, so it
is never done in pytest's own process.  The same attacks graded end to end, through the CLI and the
sandbox, are in tests/test_forgery.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

PRELUDE = """
import gc, json, sys, weakref
sys.path.insert(0, {checks!r})
import torch
from checks.runners import gpu_runs, probes, harness  # what the zygote has loaded
from checks.student import serve
from checks.student import absence
REAL = [weakref.ref(sys.modules[name].GradScaler) for name in absence.SCALER_MODULES]
serve.prepare(("loss_scaler",))
del serve, harness, probes, gpu_runs
"""


def run_after_removal(body: str) -> dict[str, object]:
    """Run ``body`` after the removal in a fresh interpreter; it sets ``result`` (a dict), printed as JSON."""
    code = PRELUDE.format(checks=str(ROOT / "assignment")) + textwrap.dedent(body) + "\nprint(json.dumps(result))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_real_classes_are_freed() -> None:
    """Not one reference to torch's GradScaler classes is left anywhere: the garbage collector freed them."""
    result = run_after_removal("""
        gc.collect()
        result = {"alive": [ref() is not None for ref in REAL]}
        if any(result["alive"]):
            result["held by"] = [str(type(holder)) + str(list(holder)[:5] if isinstance(holder, dict) else "")
                                 for ref in REAL if ref() is not None for holder in gc.get_referrers(ref())]
    """)
    assert result == {"alive": [False, False, False]}


def test_a_raw_walk_from_everything_nameable_finds_no_scaler_and_no_handle() -> None:
    """Raw access (vars, globals, closures, defaults, subclasses, gc) from every module finds only the stand-in,
    and no handle that brings a kernel back: after every dispatcher registration found is destroyed (torch's
    own Library objects included), the kernels still refuse."""
    result = run_after_removal("""
        import types
        seen, stack, found, handles = set(), list(sys.modules.values()) + gc.get_objects(), [], []
        stack += [object] + list(vars(__builtins__).values()) if isinstance(__builtins__, dict) else [__builtins__]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, type):
                if obj.__name__ == "GradScaler" and obj is not absence.GradScaler:
                    found.append(f"{obj.__module__}.{obj.__qualname__}")
                try:
                    stack += list(type.__subclasses__(obj)) + list(vars(obj).values())
                except TypeError:
                    pass
            if type(obj).__name__ in ("_DispatchModule", "Library"):
                handles.append(obj)
            if isinstance(obj, types.ModuleType):
                stack += list(vars(obj).values())
            elif isinstance(obj, types.FunctionType):
                stack += [obj.__globals__, *(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values(),
                          *(vars(obj).values())]
                for cell in obj.__closure__ or ():
                    try:
                        stack.append(cell.cell_contents)
                    except ValueError:  # an empty cell
                        pass
            elif isinstance(obj, dict):
                stack += list(obj.values())
            elif isinstance(obj, (list, tuple, set, frozenset)):
                stack += list(obj)
        for handle in handles:
            try:
                handle._destroy() if type(handle).__name__ == "Library" else handle.reset()
            except Exception:
                pass
        del handles
        gc.collect()
        try:
            torch._amp_update_scale_(torch.ones(()), torch.zeros((), dtype=torch.int32), torch.zeros(()), 2.0, 0.5, 1)
            kernel = "worked"
        except absence.NotAvailableInTask1:
            kernel = "refused"
        result = {"found": found, "kernel": kernel, "walked": len(seen) > 10000}
    """)
    assert result == {"found": [], "kernel": "refused", "walked": True}


def test_raw_memory_finds_no_registration_that_brings_the_kernels_back() -> None:
    """Raw memory without ctypes (numpy's array interface over any address, tests/attacks.py): a scan of the
    process's memory finds every live dispatcher registration and resets it; the scan works (it finds each of
    torch's own ``torch.library`` handles), yet the kernels still refuse: no object owns the replacement."""
    from attacks import RAW_MEMORY_RESET

    result = run_after_removal(
        "known = {id(lib.m) for lib in gc.get_objects() if type(lib).__name__ == 'Library' and lib.m is not None}\n"
        + RAW_MEMORY_RESET + """
try:
    torch._amp_update_scale_(torch.ones(()), torch.zeros((), dtype=torch.int32), torch.zeros(()), 2.0, 0.5, 1)
    kernel = "worked"
except absence.NotAvailableInTask1:
    kernel = "refused"
result = {"kernel": kernel, "torch's handles found": len(known) > 3 and known <= set(_found_handles),
          "reset": _reset >= len(known)}
""")
    assert result == {"kernel": "refused", "torch's handles found": True, "reset": True}


def test_the_replacement_is_permanent_on_the_pinned_torch() -> None:
    """On the torch the grader pins, the refusing kernels are kept by no handle (not a leaked one)."""
    assert run_after_removal("result = {'kept': absence.kept}") == {"kept": "permanent"}


def test_a_permanent_registration_survives_its_reset_and_its_wrapper() -> None:
    """What makes it permanent, on its own: a registration left as it is comes undone by ``reset()``; one made
    permanent stays after ``reset()`` and after its wrapper is freed; a count that does not match writes nothing."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'assignment')!r})\n" + textwrap.dedent("""
        import gc, json, torch, warnings
        from checks.student import absence

        def refused(*args, **kwargs):
            raise absence.NotAvailableInTask1("refused")

        def kernel():
            try:
                torch._amp_update_scale_(torch.ones(()), torch.zeros((), dtype=torch.int32), torch.zeros(()), 2.0,
                                         0.5, 1)
                return "worked"
            except absence.NotAvailableInTask1:
                return "refused"

        def registered():
            library = torch._C._dispatch_library("IMPL", "aten", "")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                library.impl("_amp_update_scale_", "CPU", refused)
            return library

        result = {}
        library = registered()
        result["wrong count"] = [absence._make_permanent(library, 2), kernel()]
        library.reset()
        result["its reset"] = kernel()
        library = registered()
        result["permanent"] = [absence._make_permanent(library, 1), kernel()]
        library.reset()
        del library
        gc.collect()
        result["after reset and free"] = kernel()
        print(json.dumps(result))
    """))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"wrong count": [False, "refused"], "its reset": "worked",
                                       "permanent": [True, "refused"], "after reset and free": "refused"}


def test_every_route_to_the_kernels_is_refused() -> None:
    """The kernels refuse by every overload and route, and a GradScaler rebuilt from torch's own source
    file meets them."""
    result = run_after_removal("""
        import importlib.util, os
        s, t, f = torch.tensor(4.0), torch.tensor(0, dtype=torch.int32), torch.tensor(0.0)
        A = torch.ops.aten
        grads = lambda: [torch.ones(2)]
        routes = {
            "torch._amp_update_scale_": lambda: torch._amp_update_scale_(s, t, f, 2.0, 0.5, 3),
            "aten functional": lambda: A._amp_update_scale.default(s, t, f, 2.0, 0.5, 3),
            "aten out": lambda: A._amp_update_scale.out(s, t, f, 2.0, 0.5, 3, out=torch.empty(())),
            "torch._amp_foreach_...": lambda: torch._amp_foreach_non_finite_check_and_unscale_(grads(), f, s),
            "aten unscale functional": lambda: A._amp_foreach_non_finite_check_and_unscale.default(grads(), f, s),
            "redispatch": lambda: A._amp_update_scale_.default.redispatch(
                torch._C.DispatchKeySet(torch._C.DispatchKey.CPU), s, t, f, 2.0, 0.5, 3),
            "computed kernel": lambda: torch._C._dispatch_get_computed_kernel_for_dispatch_key(
                "aten::_amp_update_scale_", torch._C.DispatchKey.CPU).call_boxed(
                torch._C.DispatchKeySet(torch._C.DispatchKey.CPU), s, t, f, 2.0, 0.5, 3),
            "functionalize": lambda: torch.func.functionalize(
                lambda a, b, c: torch._amp_update_scale_(a, b, c, 2.0, 0.5, 3))(s, t, f),
        }
        path = os.path.join(os.path.dirname(torch.__file__), "amp", "grad_scaler.py")
        spec = importlib.util.spec_from_file_location("rebuilt_grad_scaler", path)
        rebuilt = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(rebuilt)

        def rebuilt_scaler():
            scaler = rebuilt.GradScaler("cpu", init_scale=4.0)
            param = torch.nn.Parameter(torch.ones(2))
            optimizer = torch.optim.SGD([param], lr=0.1)
            scaler.scale(param.sum()).backward()
            scaler.step(optimizer)
            scaler.update()

        routes["GradScaler rebuilt from torch's source"] = rebuilt_scaler
        routes["torch.amp.GradScaler"] = lambda: torch.amp.GradScaler("cpu")
        routes["subclass of torch.GradScaler"] = lambda: type("S", (torch.GradScaler,), {})
        result = {}
        for name, route in routes.items():
            try:
                route()
                result[name] = "worked"
            except Exception as exc:
                result[name] = type(exc).__name__ + ("" if "loss_scaler.py runs" in str(exc) else ": " + str(exc)[:200])
    """)
    assert result == dict.fromkeys(result, "NotAvailableInTask1") and len(result) == 11


def test_naming_the_class_still_works() -> None:
    """Honest code that only names the class (a type hint evaluated at definition, isinstance, a docstring)."""
    result = run_after_removal("""
        def hinted(scaler: torch.amp.GradScaler = None) -> torch.cuda.amp.GradScaler:
            "Works like torch.amp.GradScaler."
        result = {"isinstance": isinstance(object(), torch.amp.GradScaler), "name": torch.GradScaler.__name__,
                  "hint": hinted.__annotations__["scaler"].__name__}
    """)
    assert result == {"isinstance": False, "name": "GradScaler", "hint": "GradScaler"}


def test_the_judge_keeps_the_real_scaler() -> None:
    """Only the student's process loses it: the public checks' judge (pytest's process) still has torch's."""
    from checks.runners import harness

    scaler = harness.torch_scaler(init_scale=4.0)
    assert type(scaler).__module__ == "torch.amp.grad_scaler" and scaler.get_scale() == 4.0


@pytest.mark.parametrize("modules, removed", [(("loss_scaler",), True), (("amp_step",), False),
                                              (("loss_scaler", "amp_step"), True)])
def test_only_processes_that_run_loss_scaler_lose_it(modules: tuple[str, ...], removed: bool) -> None:
    """Task 2 hands amp_step torch's own GradScaler: a process that runs amp_step.py alone keeps it."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'assignment')!r})\n"
            "import torch\nfrom checks.student import serve\n"
            f"serve.prepare({modules!r})\n"
            "print(torch.amp.GradScaler.__module__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (done.stdout.strip() == "checks.student.absence") is removed


ARITHMETIC = """
def kernel_answers():
    answers = {}
    scale, tracker = torch.tensor(4.0), torch.tensor(0, dtype=torch.int32)
    try:
        torch._amp_update_scale_(scale, tracker, torch.tensor(0.0), 2.0, 0.5, 1)
        answers["update"] = [float(scale), int(tracker)]
    except absence.NotAvailableInTask1:
        answers["update"] = "refused"
    grads, found = [torch.tensor([2.0, 4.0]), torch.tensor([float("inf")])], torch.tensor(0.0)
    try:
        torch.ops.aten._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.tensor(0.5))
        answers["unscale"] = [grads[0].tolist(), float(found)]
    except absence.NotAvailableInTask1:
        answers["unscale"] = "refused"
    return answers
"""


def test_the_inactive_real_kernels_cannot_be_copied_back() -> None:
    """Raw memory without ctypes (tests/attacks.py, REVIVE_INACTIVE): the dispatcher keeps the kernel that the
    refusing one replaced in its list, below it; copying that one back into the operator's CPU slot would give torch's
    arithmetic (scale 4 grown to 8, gradients unscaled by 0.5).  Nothing is found to copy: both still refuse."""
    from attacks import REVIVE_INACTIVE

    result = run_after_removal(ARITHMETIC + REVIVE_INACTIVE + """
result = {"revived": _revived, **kernel_answers()}
""")
    assert result == {"revived": 0, "update": "refused", "unscale": "refused"}


def test_no_copy_of_the_real_kernels_is_left_in_memory() -> None:
    """torch's own copy of each real CPU kernel (a SafeKernelFunction taken before the removal) tells its code
    addresses; afterwards no writable word of the process pairs its boxed and unboxed functions, the kernel
    lists show the inactive kernels boxed only (ours), and the DispatchStub tables of their arithmetic are empty."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'assignment')!r})\n" + textwrap.dedent("""
        import ctypes, json, os, torch
        from checks.student import absence, serve

        def words(address, count):
            return (ctypes.c_uint64 * count).from_address(address)

        taken = [torch._C._dispatch_get_computed_kernel_for_dispatch_key("aten::" + name, torch._C.DispatchKey.CPU)
                 for name in absence.REFUSED_KERNELS]
        real = [list(words(absence._pybind_value(kernel), 4)) for kernel in taken]
        pairs = [(boxed, unboxed) for _, boxed, unboxed, _ in real]
        serve.prepare(("loss_scaler",))
        found = 0
        for start, end, permissions, _ in absence._mappings():
            if "w" in permissions:
                memory = torch.frombuffer((ctypes.c_char * (end - start)).from_address(start), dtype=torch.int64)
                for boxed, unboxed in pairs:
                    for index in (memory[:-1] == boxed).nonzero().flatten().tolist():
                        found += int(memory[index + 1]) == unboxed
        lists = [line.rpartition("[")[2] for name in absence.REFUSED_KERNELS
                 for line in torch._C._dispatch_dump("aten::" + name).splitlines() if line.startswith("CPU")]
        library = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        stub = lambda name: [words(ctypes.addressof(ctypes.c_uint64.in_dll(library, name.format(variant))), 1)[0]
                             for variant in ("7DEFAULT", "4AVX2", "6AVX512")]
        print(json.dumps({"unboxed": [bool(unboxed) for _, _, unboxed, _ in real], "pairs found": found,
                          "kernel lists": lists, "scrubbed": absence.scrubbed,
                          "stubs": [stub("_ZN2at6native12DispatchStubIPFRNS_6TensorES3_S3_RKS2_ddlENS0_48_amp_"
                                         "update_scale_cpu_stub_DECLARE_DISPATCH_typeEE{}E"),
                                    stub("_ZN2at6native12DispatchStubIPFvN3c108ArrayRefINS_6TensorEEERS4_RKS4_ENS0_72"
                                         "_amp_foreach_non_finite_check_and_unscale_cpu_stub_DECLARE_DISPATCH_typeEE{}E"
                                         )]}))
    """))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"unboxed": [True, True], "pairs found": 0,
                                       "kernel lists": [" boxed ]", " boxed ]"] * 2, "scrubbed": "yes",
                                       "stubs": [[0] * 3, [0] * 3]}


@pytest.mark.parametrize("strict", [True, False])
def test_a_layout_not_the_known_one_stops_the_graders_process_and_not_the_public_checks(strict: bool) -> None:
    """Where the dispatch table's slots are not where they are looked for (here: a bound too short to reach them),
    the grader's process (strict) raises before any student line; the public checks' process goes on, saying why,
    with the refusing kernels in place."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'assignment')!r})\n" + textwrap.dedent(f"""
        import json, torch
        from checks.student import absence
        absence._ENTRY_BYTES = 64
        try:
            absence.remove_reference_scaler({strict})
            outcome = "went on"
        except absence.KernelsLeftBehind:
            outcome = "stopped"
        try:
            torch._amp_update_scale_(torch.ones(()), torch.zeros((), dtype=torch.int32), torch.zeros(()), 2.0, 0.5, 1)
            kernel = "worked"
        except absence.NotAvailableInTask1:
            kernel = "refused"
        print(json.dumps([outcome, absence.scrubbed, kernel]))
    """))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    import torch

    real = 1 if torch.version.cuda is None else 2  # a CUDA build has a CUDA kernel beside the CPU one
    why = f"no: KernelsLeftBehind: 0 replaced slots found for _amp_update_scale_, not {real}"
    assert json.loads(done.stdout) == ["stopped" if strict else "went on", why, "refused"]


#: At import, in a Task-1 process: every GradScaler class the garbage collector knows of (what the zygote froze
#: included: a student may unfreeze it) that is not the stand-in.
COUNTS_REAL_CLASSES = """
import gc as _gc
_gc.unfreeze()
print("REAL-CLASSES", sum(1 for _o in _gc.get_objects() if isinstance(_o, type) and _o.__name__ == "GradScaler"
                           and "absence" not in _o.__module__), flush=True)
"""

IN_A_STUDENT_PROCESS = '''
import sys
from pathlib import Path
sys.path[:0] = [{root!r}, {root!r} + "/assignment"]
from autograder.engine import intake
from autograder.sandbox import runner as sandbox
sandbox.start_zygote()
from checks.judge import cases
staged = intake.stage(Path({submission!r}))
runner = sandbox.SandboxRunner(staged.folder)
runner.begin_test("t")
runner.run("scaler_ops", cases.run_args({{"init_scale": 4.0}}, [False]))
runner.close()
print(runner.output_by_test().get("t", ""))
import shutil; shutil.rmtree(staged.folder, ignore_errors=True)
'''


def test_a_task1_process_forked_by_the_grader_finds_no_real_class_even_in_the_frozen_heap(tmp_path: Path) -> None:
    """The zygotes keep their heap out of the collector's sight (``gc.freeze``): the collection that frees torch's
    classes in the Task-1 zygote must still see it, or they would live on, frozen, for a student's ``gc.unfreeze``."""
    submission = tmp_path / "probe"
    submission.mkdir()
    for name in ("amp_step.py", "answers.py"):
        shutil.copy(ROOT / "solutions" / name, submission / name)
    (submission / "loss_scaler.py").write_text((ROOT / "solutions" / "loss_scaler.py").read_text()
                                               + COUNTS_REAL_CLASSES)
    code = IN_A_STUDENT_PROCESS.format(root=str(ROOT), submission=str(submission))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "REAL-CLASSES 0" in done.stdout, done.stdout[-2000:]
