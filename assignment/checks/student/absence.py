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
  leaked instead (a reference nobody owns), which a raw-memory scan can find again.
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


def _library_address(wrapper: Any) -> int | None:
    """The address of the ``torch::Library`` that pybind's ``wrapper`` owns, if its layout is the one known.

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
    library = _library_address(wrapper)
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


#: How the refusing kernels are kept: "permanent" (no handle anywhere can remove them), else "leaked" (the
#: registration's Python wrapper is kept alive by a reference nobody owns), on a torch whose layout is not known.
kept = ""


def _replace_kernels() -> None:
    global kept
    library = torch._C._dispatch_library("IMPL", "aten", "")
    keys = ("CPU", "CUDA")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": that is the point
        for name in REFUSED_KERNELS:
            for key in keys:
                library.impl(name, key, _kernel(name))
    if _make_permanent(library, len(REFUSED_KERNELS) * len(keys)):
        kept = "permanent"  # the wrapper now owns an empty registration: freeing it changes nothing
    else:
        # Dropping the last reference would unregister the kernels; one reference owned by nobody keeps them.
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(library))
        kept = "leaked"


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


def remove_reference_scaler() -> None:
    """Take torch's GradScaler and its kernels out of this process for good (idempotent)."""
    global _removed
    if _removed:
        return
    _replace_kernels()
    _replace_classes()
    _removed = True
