"""Task 1's rule made true by absence: where ``loss_scaler.py`` runs, torch's scaler is not there.

Task 1 asks for a loss scaler written by hand.  Rather than watching what the student's code
does with torch's ``GradScaler`` (a rule inside the process, which the next trick of the
language beats), :func:`remove_reference_scaler` takes the capability out of the process
before the first student line runs:

* torch's loss-scaling kernels (``aten::_amp_update_scale_`` and
  ``aten::_amp_foreach_non_finite_check_and_unscale_``, which every overload and every route
  — ``torch._amp_*``, ``torch.ops.aten``, ``redispatch``, functionalization — ends in) are
  replaced in torch's dispatcher, for the CPU and CUDA backends, by kernels that raise
  :class:`NotAvailableInTask1`.  The registration is made permanent: its list of handles is
  emptied in place (:func:`_make_permanent`), so no object in the process (not its Python wrapper,
  which is freed, nor the C++ ``torch::Library``, whose ``reset()`` and destructor now undo
  nothing) can unregister the replacement and bring the real kernels back, whoever finds it
  (``gc``, a scan of raw memory).  On a torch whose layout is not the known one, the wrapper is
  leaked instead (a reference nobody owns), which a raw-memory scan can find again.  Nothing of
  the real kernels is left to copy back either (:func:`_scrub`): the dispatcher keeps each kernel
  it replaced, inactive, in the operator's list of kernels for its key, below ours; every copy of
  it in the process's writable memory is overwritten with ours, and the ``DispatchStub`` tables
  that hold the kernels' CPU arithmetic are zeroed.  Where that cannot be done and checked (a
  torch whose layout is not the known one), the grader's processes (``strict``) raise
  :class:`KernelsLeftBehind` before any student line; the public checks go on without it.
* the ``GradScaler`` classes (``torch.amp.GradScaler``, ``torch.GradScaler``,
  ``torch.cuda.amp.GradScaler``, ``torch.cpu.amp.GradScaler`` and their modules
  ``torch.*.amp.grad_scaler``) are replaced by :class:`GradScaler`, a stand-in that raises on
  instantiation and subclassing, and the last references torch keeps to the real ones are
  dropped, so the garbage collector frees them.  Naming the class (a type hint, an
  ``isinstance`` check, a docstring) still works.

A ``GradScaler`` rebuilt from torch's own source file would meet the refusing kernels; the grader
also hides those files (:func:`scaler_sources`) from Task 1's processes, so that not even the parts
torch writes in Python (``scale()``, the constructor's checks) can be borrowed there: the only way to
Task 1's points is to implement the scaler.  The grader calls this in every student
process that imports ``loss_scaler.py``; the public checks do the same in the process that runs
the student's files (:mod:`checks.student.serve`), so both refuse alike.

This module imports nothing but torch, the standard library and the words table (standard library only).
Call it once per process.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import types
import typing
import warnings
from typing import Any, NoReturn

import torch

from checks.words import english

#: The dispatcher operators torch's GradScaler computes with (every overload reaches one of them).
REFUSED_KERNELS = ("_amp_update_scale_", "_amp_foreach_non_finite_check_and_unscale_")
#: The dispatch keys whose kernels for them are replaced.
KEYS = ("CPU", "CUDA")
#: torch's modules that define a GradScaler class, and the namespaces that export one.
SCALER_MODULES = ("torch.amp.grad_scaler", "torch.cuda.amp.grad_scaler", "torch.cpu.amp.grad_scaler")
SCALER_EXPORTS = ("torch", "torch.amp", "torch.cuda.amp", "torch.cpu.amp")
#: torch's Python files that implement a scaler (relative to torch's folder): the grader hides them, and their
#: compiled forms, from Task 1's processes, so that a scaler cannot be rebuilt from torch's own source there.
SCALER_SOURCES = ("amp/grad_scaler.py", "cuda/amp/grad_scaler.py", "cpu/amp/grad_scaler.py",
                  "distributed/fsdp/sharded_grad_scaler.py")


class NotAvailableInTask1(RuntimeError):
    """Raised by whatever stands in for torch's scaler and its kernels in Task 1."""


def _refuse(what: str) -> NoReturn:
    raise NotAvailableInTask1(english("refused.task1", what=what))


class GradScaler:
    """Stands in for ``torch.amp.GradScaler`` while ``loss_scaler.py`` runs: using it raises."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _refuse("torch.amp.GradScaler")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        _refuse("subclassing torch.amp.GradScaler")


def _kernel(name: str) -> Any:
    def refused(*args: Any, **kwargs: Any) -> NoReturn:
        _refuse(f"torch.{name}")

    refused.__name__ = name
    return refused


def _pybind_value(wrapper: Any) -> int | None:
    """The address of the C++ object that pybind's ``wrapper`` owns, if its layout is the one known.

    pybind11's instance (pybind11/detail/common.h): the object's head, then the value pointer and its
    holder (a ``std::unique_ptr``: the same pointer) in three words, the weak-reference list, and a byte of
    flags (owned, simple layout, holder constructed, registered: 0x0f for a wrapper made by its constructor)."""
    head = object.__basicsize__
    if type(wrapper).__basicsize__ != head + 5 * 8:
        return None
    value, holder, _, _, flags = (ctypes.c_uint64 * 5).from_address(id(wrapper) + head)
    return value if value and value == holder and flags & 0x1F == 0x0F else None


def _make_permanent(wrapper: Any, registrations: int) -> bool:
    """Empty the registration list of ``wrapper``'s ``torch::Library`` without destroying its handles, so that
    nothing (its ``reset()``, its destruction, raw memory finding it later) can undo the registrations.

    ``torch::Library`` (torch/library.h): ``kind_`` at 0, ``ns_`` (a ``std::string``: pointer, length) at 8,
    ``registrars_`` (a ``std::vector`` of handles, each one ``std::function``: begin, end, capacity) at 96.  Every
    field is checked first: on another layout nothing is written and False says so."""
    library = _pybind_value(wrapper)
    if library is None:
        return False
    kind, name, length = (ctypes.c_uint64 * 3).from_address(library)
    registrars = (ctypes.c_uint64 * 3).from_address(library + 96)
    begin, end, capacity = registrars
    if (kind & 0xFFFFFFFF != 1 or length != 4 or ctypes.string_at(name, 4) != b"aten"  # IMPL, "aten"
            or not begin or end - begin != registrations * 32 or capacity < end):
        return False
    registrars[1] = begin  # empty: the handles (and the undoing they would do when destroyed) are never run
    return True


class KernelsLeftBehind(RuntimeError):
    """torch's real scaler kernels could not be taken out of the process's memory (a layout not the known one):
    a process of the grader's that meets this does not serve Task 1."""


#: The words of a c10::KernelFunction (ATen/core/boxing/KernelFunction.h) that make it a kernel: its functor (an
#: intrusive_ptr, whose target keeps its reference count in the low half of the word after its vtable), its boxed
#: function, its unboxed function and its SymInt-unboxed one (its fifth word, its tokens, is left as it is).
_KERNEL_WORDS = 4
#: A bound on where, from the start of an operator's c10::impl::OperatorEntry (name, schema, tags, then the dispatch
#: table), its CPU and CUDA slots lie.
_ENTRY_BYTES = 4096
#: torch's DispatchStub objects that hold the two kernels' CPU arithmetic (ATen/native/DispatchStub.h: a table of
#: function pointers, one per device, and the CPU variants DEFAULT, AVX2, AVX512 as static members), with the
#: mangled signature of the function type each one holds.
_STUBS = {
    "_amp_update_scale_cpu_stub": "RNS_6TensorES3_S3_RKS2_ddl",
    "_amp_foreach_non_finite_check_and_unscale_cpu_stub": "vN3c108ArrayRefINS_6TensorEEERS4_RKS4_",
}
_STUB_WORDS = 7  # cpu (cached), cuda, hip, mps, mtia, hpu, privateuse1
_STUB_VARIANTS = ("DEFAULT", "AVX2", "AVX512")


def _mappings() -> list[tuple[int, int, str, str]]:
    """(start, end, permissions, name) of each mapping of this process that can be read without side effects."""
    found = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            name = fields[5] if len(fields) > 5 else ""
            if fields[1].startswith("r") and not name.startswith(("[vvar", "[vsyscall", "/dev/")):
                start, end = (int(bound, 16) for bound in fields[0].split("-"))
                found.append((start, end, fields[1], name))
    return found


def _words(address: int, count: int) -> Any:
    return (ctypes.c_uint64 * count).from_address(address)


def _operator_entry(name: str) -> int | None:
    """The address of ``aten::name``'s OperatorEntry: its handle (c10::OperatorHandle, ATen/core/dispatch/
    Dispatcher.h) holds a pointer to its OperatorDef (whose first member is the entry), then an iterator to the
    std::list node that holds that OperatorDef (two link words before it); both are checked."""
    wrapper = torch._C._dispatch_find_schema_or_throw("aten::" + name, "")
    handle = _pybind_value(wrapper)
    if handle is None:
        return None
    definition, node = _words(handle, 2)
    del wrapper
    return definition if definition and node + 16 == definition else None


def _snapshot(entry: int, mappings: list[tuple[int, int, str, str]]) -> bytearray | None:
    end = next((end for start, end, _, _ in mappings if start <= entry < end), None)
    return None if end is None else bytearray((ctypes.c_char * min(_ENTRY_BYTES, end - entry)).from_address(entry))


def _replaced_slots(before: bytearray, entry: int) -> list[tuple[list[int], list[int]]]:
    """(real, refusing) kernels of each dispatch-table slot of ``entry`` that held a kernel callable unboxed
    (a real one) in ``before`` and holds a boxed-only one (ours) now."""
    old = memoryview(before).cast("Q")
    new = _words(entry, len(old))
    slots = []
    for at in range(len(old) - _KERNEL_WORDS):
        real, ours = list(old[at:at + _KERNEL_WORDS]), list(new[at:at + _KERNEL_WORDS])
        if (all(real[:2]) and any(real[2:]) and all(ours[:2]) and not any(ours[2:])
                and ours[0] != real[0] and ours[1] != real[1]):
            slots.append((real, ours))
    return slots


def _needle(value: int) -> torch.Tensor:
    """A one-element tensor holding ``value``, built without a copy of it anywhere else (zero it after use)."""
    mask = 0x5A5A5A5A5A5A5A5A
    return torch.tensor([value ^ mask], dtype=torch.int64).bitwise_xor_(mask)


def _overwrite(replaced: list[tuple[list[int], list[int]]], mappings: list[tuple[int, int, str, str]]) -> list[int]:
    """Overwrite every copy of each real kernel of ``replaced`` in the process's writable memory with ours (each
    copy then holds a reference to our functor, so its count is raised by one per copy; the real functor, which
    points to no code, is left with one reference nobody owns).  Returns how many copies of each there were."""
    needles = [_needle(real[1]) for real, _ in replaced]
    copies = [0] * len(replaced)
    for start, end, permissions, _ in mappings:
        if "w" not in permissions:
            continue
        memory = torch.frombuffer((ctypes.c_char * (end - start)).from_address(start), dtype=torch.int64)
        hits = memory == needles[0]
        for needle in needles[1:]:
            hits |= memory == needle
        for index in hits.nonzero().flatten().tolist():
            address = start + 8 * (index - 1)
            if not 1 <= index <= len(memory) - _KERNEL_WORDS + 1:
                continue
            for which, (real, ours) in enumerate(replaced):
                if list(_words(address, _KERNEL_WORDS)) == real:
                    functor = _words(ours[0] + 8, 1)
                    if not 0 < functor[0] & 0xFFFFFFFF < 1 << 24:
                        raise KernelsLeftBehind("our kernel's functor has no plausible reference count")
                    functor[0] += 1
                    _words(address, _KERNEL_WORDS)[:] = ours
                    copies[which] += 1
    for needle in needles:
        needle.zero_()
    return copies


def _clear_stubs(mappings: list[tuple[int, int, str, str]]) -> None:
    """Zero the DispatchStub tables that hold the kernels' CPU arithmetic (a call through them then reports a
    missing kernel); every word is checked to be empty or to point into code first."""
    library = next((os.path.join(folder, name) for folder in [os.path.join(os.path.dirname(torch.__file__), "lib")]
                    for name in sorted(os.listdir(folder)) if name.startswith("libtorch_cpu.")), None)
    if library is None:
        raise KernelsLeftBehind("torch's libtorch_cpu was not found")
    handle = ctypes.CDLL(library, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    code = [(start, end) for start, end, permissions, _ in mappings if "x" in permissions]
    tables = []
    for stub, signature in _STUBS.items():
        tables.append((f"_ZN2at6native{len(stub)}{stub}E", _STUB_WORDS))
        tables += [(f"_ZN2at6native12DispatchStubIPF{signature}ENS0_{len(stub) + 22}{stub}_DECLARE_DISPATCH_typeEE"
                    f"{len(variant)}{variant}E", 1) for variant in _STUB_VARIANTS]
    found = []
    for symbol, count in tables:
        try:
            table = _words(ctypes.addressof(ctypes.c_uint64.in_dll(handle, symbol)), count)
        except ValueError:
            raise KernelsLeftBehind(f"torch has no {symbol}") from None
        if not all(word == 0 or any(start <= word < end for start, end in code) for word in table):
            raise KernelsLeftBehind(f"{symbol} does not hold code pointers")
        found.append(table)
    for table in found:
        table[:] = [0] * len(table)


def _scrub(entries: dict[str, int], before: dict[str, bytearray], real_keys: dict[str, int]) -> None:
    """Leave no copy of the real kernels that ours replaced: each is still kept, inactive, in its operator's list of
    kernels for its dispatch key, below ours, where raw memory could copy it back into the dispatch table."""
    mappings = _mappings()
    replaced = []
    for name, entry in entries.items():
        slots = _replaced_slots(before[name], entry)
        before[name][:] = bytes(len(before[name]))
        if len(slots) != real_keys[name] or len({tuple(ours[1:]) for _, ours in slots}) > 1:
            raise KernelsLeftBehind(f"{len(slots)} replaced slots found for {name}, not {real_keys[name]}")
        replaced += slots
    writable = [(start, end) for start, end, permissions, _ in mappings if "w" in permissions]
    if not all(any(start <= ours[0] < end - 16 for start, end in writable) for _, ours in replaced):
        raise KernelsLeftBehind("our kernel's functor is not in writable memory")
    if not all(_overwrite(replaced, mappings)):
        raise KernelsLeftBehind("an inactive kernel was not found")
    for name in entries:
        left = [line for line in torch._C._dispatch_dump("aten::" + name).splitlines()
                if line.startswith(("CPU", "CUDA")) and "unboxed" in line.rpartition("[")[2]]
        if left:
            raise KernelsLeftBehind(f"{name} still has a real kernel: {left}")
    _clear_stubs(mappings)


#: How the refusing kernels are kept: "permanent" (no handle anywhere can remove them), else "leaked" (the
#: registration's Python wrapper is kept alive by a reference nobody owns), on a torch whose layout is not known.
kept = ""
#: Whether the real kernels were taken out of the process's memory ("yes"), or why not ("no: ...").
scrubbed = ""


def _located() -> tuple[dict[str, int], dict[str, bytearray], dict[str, int]]:
    """Before the replacement: each operator's entry, a copy of the start of it (zeroed after use: it holds the real
    kernels' words), and how many of its keys have a real kernel."""
    entries = {name: _operator_entry(name) for name in REFUSED_KERNELS}
    mappings = _mappings()
    before = {name: _snapshot(entry, mappings) for name, entry in entries.items() if entry is not None}
    if len(before) != len(REFUSED_KERNELS) or None in before.values():
        raise KernelsLeftBehind("an operator's entry in torch's dispatcher was not found")
    real_keys = {name: sum(torch._C._dispatch_has_kernel_for_dispatch_key("aten::" + name, key) for key in KEYS)
                 for name in REFUSED_KERNELS}
    return entries, before, real_keys  # type: ignore[return-value]


def _replace_kernels(strict: bool) -> None:
    global kept, scrubbed
    library = torch._C._dispatch_library("IMPL", "aten", "")
    try:
        located, failure = _located(), ""
    except Exception as exc:  # noqa: BLE001 - whatever a torch or a system not the known one raises: said below
        located, failure = None, f"{type(exc).__name__}: {exc}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": that is the point
        for name in REFUSED_KERNELS:
            for key in KEYS:
                library.impl(name, key, _kernel(name))
    if _make_permanent(library, len(REFUSED_KERNELS) * len(KEYS)):
        kept = "permanent"  # the wrapper now owns an empty registration: freeing it changes nothing
    else:
        # Dropping the last reference would unregister the kernels; one reference owned by nobody keeps them.
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(library))
        kept = "leaked"
    try:
        if located is None:
            raise KernelsLeftBehind(failure)
        _scrub(*located)
        scrubbed = "yes"
    except Exception as exc:  # noqa: BLE001 - as above
        scrubbed = f"no: {type(exc).__name__}: {exc}"
        if strict:
            raise KernelsLeftBehind(scrubbed) from None
    finally:
        for copy in (located[1].values() if located else ()):
            copy[:] = bytes(len(copy))


def _replace_classes() -> None:
    for name in SCALER_MODULES:
        stand_in = types.ModuleType(name, "Stands in for torch's grad_scaler module while loss_scaler.py runs.")
        stand_in.GradScaler = GradScaler  # type: ignore[attr-defined]
        parent, _, leaf = name.rpartition(".")
        if name in sys.modules:
            sys.modules[name] = stand_in
            if parent in sys.modules:
                setattr(sys.modules[parent], leaf, stand_in)
    for name in SCALER_EXPORTS:
        module = sys.modules.get(name)
        if module is not None and "GradScaler" in vars(module):
            module.GradScaler = GradScaler  # type: ignore[attr-defined]
    # torch.jit keeps (function, "aten::name") pairs of what torch.amp exported at import.
    builtins = sys.modules.get("torch.jit._builtins")
    table = getattr(builtins, "_builtin_ops", None)
    if isinstance(table, list):
        table[:] = [(fn, op) for fn, op in table if not (isinstance(fn, type) and fn.__name__ == "GradScaler")]
    overloads = getattr(typing, "_overload_registry", {})  # @typing.overload's record, by module (Python 3.11+)
    for name in SCALER_MODULES:
        overloads.pop(name, None)
    gc.collect()


def scaler_sources() -> list[str]:
    """The real paths of torch's scaler sources (:data:`SCALER_SOURCES`) and of their compiled files."""
    torch_folder = os.path.dirname(os.path.realpath(torch.__file__))
    found = []
    for relative in SCALER_SOURCES:
        source = os.path.join(torch_folder, relative)
        cache = os.path.join(os.path.dirname(source), "__pycache__")
        stem = os.path.basename(source)[:-3] + "."
        compiled = [os.path.join(cache, name) for name in (os.listdir(cache) if os.path.isdir(cache) else ())
                    if name.startswith(stem) and name.endswith(".pyc")]
        found += [path for path in (source, *compiled) if os.path.isfile(path)]
    return sorted(found)


_removed = False


def remove_reference_scaler(strict: bool = False) -> None:
    """Take torch's GradScaler and its kernels out of this process for good (idempotent).

    ``strict`` (the grader's processes): raise :class:`KernelsLeftBehind` where the real kernels could not be
    taken out of the process's memory too (a torch whose layout is not the known one), rather than go on with
    them there; elsewhere (the public checks on a student's machine) that is only recorded in :data:`scrubbed`."""
    global _removed
    if _removed:
        return
    _replace_kernels(strict)
    _replace_classes()
    _removed = True
