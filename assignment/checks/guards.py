"""The run-time half of the policy: the guards every access of a submitted file goes through.

:mod:`checks.policy` compiles ``loss_scaler.py`` and ``amp_step.py`` so that every
attribute read calls :func:`Guards.getattr`, every write goes through
:meth:`Guards.write`, every import through :meth:`Guards.import_`.  Each guard decides by
what the object *is*:

* **Modules** expose members by kind: never a module outside :data:`ALLOWED_MODULES`,
  never a metaclass, never a frame, code object or traceback; a few functions that
  evaluate strings or reach attributes by name (``typing.get_type_hints``,
  ``operator.attrgetter``, ``dataclasses.make_dataclass``, ``torch.load``...) are refused
  by name.  The same value checks apply to every attribute of every object, so no chain of
  attributes leads to ``sys`` or a frame.
* **Private attributes** (``x._name``) may be read and written only on what your files
  made: instances and classes defined by your code, your own modules.  The check looks at
  the object's class, so naming a variable ``self`` changes nothing.
* **Writes** go to your own objects, to containers and to tensors (``p.grad = None``,
  ``t[i] = 0``); never to modules, to classes you did not define, or to other objects
  (the grader's optimizer, model, scaler...).
* **Delegation** (Task 1): once ``loss_scaler.py`` is loaded, ``torch.amp.GradScaler`` (every
  alias) and torch's private ``_amp_*`` kernels read through any guard are stand-ins that
  raise when called, instantiated or subclassed, and count the attempt in
  :data:`DELEGATION_CALLS` (the gate, test 1.17, reads the counts).  Naming them in strings,
  comments, docstrings or type hints does nothing.
"""

from __future__ import annotations

import builtins
import collections
import importlib
import operator
import sys
import types
import weakref
from typing import Any, Callable

import torch
from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence

from checks.policy import FRAME_ATTRIBUTES, READ_DUNDERS


class PolicyError(PermissionError):
    """An access the grader's policy refuses (raised in your code, like any other exception)."""


RULES = "see \"Rules for your code\" in the handout"
STUDENT_FILES = ("loss_scaler", "amp_step")
TORCH_MODULES = frozenset({
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.utils", "torch.nn.init", "torch.optim", "torch.amp",
    "torch.autograd", "torch.cuda", "torch.cuda.amp", "torch.cpu", "torch.cpu.amp", "torch.types", "torch.linalg",
    "torch.special",
})
#: Standard modules whose public members are all available (minus modules, metaclasses, frames and code).
OPEN_MODULES = frozenset({
    "math", "cmath", "numbers", "struct", "array", "decimal", "fractions", "statistics", "itertools", "collections",
    "collections.abc", "copy", "warnings", "enum", "abc", "time", "random", "__future__",
})
#: Standard modules with functions that evaluate strings, reach attributes by name or build classes from a
#: namespace: only the members listed are available.
LISTED_MODULES: dict[str, frozenset[str]] = {
    "typing": frozenset({
        "Any", "Callable", "ClassVar", "Dict", "Final", "FrozenSet", "Generic", "Iterable", "Iterator", "List",
        "Literal", "Mapping", "MutableMapping", "NamedTuple", "NewType", "NoReturn", "Optional", "Protocol",
        "Sequence", "Set", "SupportsFloat", "SupportsInt", "Tuple", "Type", "TypedDict", "TypeVar", "Union",
        "TYPE_CHECKING", "cast", "overload", "final", "runtime_checkable", "Self", "TypeAlias", "Iterable",
    }),
    "dataclasses": frozenset({"dataclass", "field", "fields", "asdict", "astuple", "replace", "is_dataclass",
                              "InitVar", "FrozenInstanceError", "MISSING", "KW_ONLY"}),
    "functools": frozenset({"partial", "reduce", "lru_cache", "cache", "cached_property", "wraps", "total_ordering",
                            "cmp_to_key", "partialmethod", "singledispatch"}),
    "operator": frozenset(name for name in dir(operator) if not name.startswith("_")) - {"attrgetter", "methodcaller"},
    "contextlib": frozenset({"contextmanager", "nullcontext", "suppress", "ExitStack", "closing"}),
}
LISTED_MODULES["typing_extensions"] = LISTED_MODULES["typing"]
ALLOWED_MODULES = TORCH_MODULES | OPEN_MODULES | frozenset(LISTED_MODULES)
#: torch members that load or generate code or reach files (modules need no entry: only those in
#: TORCH_MODULES are ever handed out, so torch.jit, torch.library, torch.utils... are refused by kind).
TORCH_REFUSED = frozenset({"load", "save", "from_file", "compile", "ops", "classes", "set_default_device"})
#: Attributes refused on every object: frames and code, and the ways from a tensor to raw memory or files.
REFUSED_ATTRIBUTES = FRAME_ATTRIBUTES | {"numpy", "tofile", "from_file", "share_memory_", "ctypes", "format_map"}
PRIVATE_KERNELS = ("_amp_update_scale_", "_amp_foreach_non_finite_check_and_unscale_")
DELEGATION_MESSAGE = ("{what} is not allowed in Task 1: ToyLossScaler must do the scaling itself "
                      "(the grader disables it wherever loss_scaler.py runs)")

#: Calls, instantiations and subclassings of torch's GradScaler and private AMP kernels, by name.
DELEGATION_CALLS: dict[str, int] = {}
#: Classes defined by submitted code (their instances are the submission's own objects).
STUDENT_CLASSES: weakref.WeakSet[type] = weakref.WeakSet()
#: Reads already allowed by the name rules: (class, name) for an instance (neither a class, a module nor a
#: ``super`` object), and (module, name) for a listed module's member.  Those rules depend on nothing else, so a
#: repeat skips them (a scenario reads the same few attributes thousands of times); the value read is still
#: checked every time.  Emptied whenever a class is registered: it changes which objects are the submission's.
_ALLOWED_READS: set[tuple[Any, str]] = set()
#: Class -> whether a class the submission defined is in its MRO (emptied with :data:`_ALLOWED_READS`).
_OWNED_CLASSES: dict[type, bool] = {}
#: Values that :meth:`Guards._checked` may refuse or replace; anything else passes as it is.
_SUSPECT_VALUES = (type, types.ModuleType, types.FrameType, types.TracebackType, types.CodeType)


#: torch's own scaler, as imported (the grader later replaces the module attributes by the stand-in).
_REFERENCE_SCALER: type = torch.amp.GradScaler


def _count(what: str) -> None:
    DELEGATION_CALLS[what] = DELEGATION_CALLS.get(what, 0) + 1


def _delegation(what: str) -> RuntimeError:
    _count(what)
    return RuntimeError(DELEGATION_MESSAGE.format(what=what))


class RefusedGradScaler:
    """Stands in for ``torch.amp.GradScaler`` wherever ``loss_scaler.py`` runs: instantiating or
    subclassing it counts as delegation (a subclass is counted when it is defined)."""

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        raise _delegation("torch.amp.GradScaler")

    def __init_subclass__(cls, **_kwargs: Any) -> None:
        _count("torch.amp.GradScaler")


def refused_kernel(name: str) -> Callable[..., Any]:
    """A stand-in for one of torch's private AMP kernels: calling it counts and raises."""
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise _delegation(f"torch.{name}")
    refuse.__name__ = name
    return refuse


_KERNEL_STUBS = {name: refused_kernel(name) for name in PRIVATE_KERNELS}


def _module_name(module: types.ModuleType) -> str:
    return getattr(module, "__name__", "")


def _class_of(obj: Any) -> type:
    return obj if isinstance(obj, type) else type(obj)


def _safe_format(text: str) -> Callable[..., str]:
    """``str.format`` without replacement fields that read attributes or items (``{0.__class__}``)."""
    import string

    def format_(*args: Any, **kwargs: Any) -> str:
        for _, field, _, _ in string.Formatter().parse(text):
            if field and ("." in field or "[" in field):
                raise PolicyError(f"str.format fields that read attributes or items ({{{field}}}) are not allowed; "
                                  f"use an f-string ({RULES})")
        return text.format(*args, **kwargs)
    return format_


class Guards:
    """The guards of one submission: the globals its files are executed with.

    ``load_sibling(name)`` loads another contract file under the same policy (an
    ``import loss_scaler`` inside ``amp_step.py``).
    """

    def __init__(self, load_sibling: Callable[[str], types.ModuleType]) -> None:
        self.load_sibling = load_sibling
        self.modules: dict[str, types.ModuleType] = {}
        self.refuse_reference = False  # set once loss_scaler.py is loaded: Task 1's process

    # -- ownership

    def owns(self, obj: Any) -> bool:
        """Whether ``obj`` is the submission's: one of its modules, classes or their instances."""
        if isinstance(obj, types.ModuleType):
            return any(obj is module for module in self.modules.values())
        if isinstance(obj, super):
            obj = obj.__self__
        cls = _class_of(obj)
        owned = _OWNED_CLASSES.get(cls)
        if owned is None:
            owned = _OWNED_CLASSES[cls] = any(base in STUDENT_CLASSES for base in cls.__mro__)
        return owned

    def _private_ok(self, obj: Any, name: str) -> bool:
        """A private attribute of the submission's own object, not one a class it did not write defines."""
        if not self.owns(obj):
            return False
        if isinstance(obj, types.ModuleType):
            return True
        target = obj.__self__ if isinstance(obj, super) else obj
        return not any(name in vars(cls) for cls in _class_of(target).__mro__ if cls not in STUDENT_CLASSES)

    # -- reading

    def _checked(self, value: Any, where: str) -> Any:
        if self.refuse_reference and isinstance(value, type) and issubclass(value, _REFERENCE_SCALER):
            return RefusedGradScaler
        if isinstance(value, types.ModuleType) and _module_name(value) not in ALLOWED_MODULES \
                and not any(value is module for module in self.modules.values()):
            raise PolicyError(f"{where} is the module {_module_name(value)!r}, which a submission may not use ({RULES})")
        if isinstance(value, (types.FrameType, types.TracebackType, types.CodeType)):
            raise PolicyError(f"{where} is a frame, traceback or code object, which a submission may not use ({RULES})")
        if isinstance(value, type) and issubclass(value, type) and value is not type:
            raise PolicyError(f"{where} is a metaclass, which a submission may not use ({RULES})")
        return value

    def _member(self, module: types.ModuleType, name: str, default: tuple[Any, ...]) -> Any:
        """A first read of ``module.name`` (:meth:`getattr` serves the reads allowed before)."""
        module_name = _module_name(module)
        where = f"{module_name}.{name}"
        if any(module is own for own in self.modules.values()):
            return getattr(module, name, *default)
        listed = LISTED_MODULES.get(module_name)
        if module_name not in ALLOWED_MODULES or (listed is not None and name not in listed) \
                or (module_name in TORCH_MODULES and name in TORCH_REFUSED):
            raise PolicyError(f"{where} is not available to a submission ({RULES})")
        if name.startswith("_") and not (module is torch and name.startswith("_foreach_")):
            raise PolicyError(f"{where}: private members of modules are not available ({RULES})")
        _ALLOWED_READS.add((module, name))
        return self._checked(getattr(module, name, *default), where)

    def getattr(self, obj: Any, name: str, *default: Any) -> Any:
        """``obj.name``, or ``default`` where it has no such attribute, if the policy allows the access."""
        if type(name) is not str:
            raise TypeError(f"attribute name must be a string, not {type(name).__name__}")
        if name in PRIVATE_KERNELS and self.refuse_reference:
            return _KERNEL_STUBS[name]
        if isinstance(obj, types.ModuleType) and (obj, name) in _ALLOWED_READS:  # torch.float32 and the like
            value = getattr(obj, name, *default)
            return value if not isinstance(value, _SUSPECT_VALUES) else self._checked(value, f"{obj.__name__}.{name}")
        if (type(obj), name) in _ALLOWED_READS:  # an instance's attribute these rules allowed before
            value = getattr(obj, name, *default)
            return value if not isinstance(value, _SUSPECT_VALUES) else \
                self._checked(value, f"reading .{name} of {type(obj).__name__}")
        where = f"reading .{name} of {type(obj).__name__}"
        if name in REFUSED_ATTRIBUTES or (name.startswith("__") and name not in READ_DUNDERS):
            raise PolicyError(f"{where} is not allowed ({RULES})")
        if isinstance(obj, types.ModuleType):
            return self._member(obj, name, default)
        if name.startswith("_") and not name.startswith("__") and not self._private_ok(obj, name):
            raise PolicyError(f"{where} is not allowed: private attributes may be used only on objects of classes "
                              f"your file defines ({RULES})")
        if name == "format" and isinstance(obj, str):
            return _safe_format(obj)
        if name == "format" and obj is str:
            return lambda text, *args, **kwargs: _safe_format(text)(*args, **kwargs)
        if not isinstance(obj, (type, super)):
            _ALLOWED_READS.add((type(obj), name))
        return self._checked(getattr(obj, name, *default), where)

    def hasattr(self, obj: Any, name: str) -> bool:
        try:
            self.getattr(obj, name)
        except AttributeError:
            return False
        return True

    # -- writing

    def write(self, obj: Any) -> Any:
        """What ``obj.x = ...``, ``obj[k] = ...`` and ``del`` act on: ``obj`` itself if it is the
        submission's own, else a proxy that lets through only what the policy allows."""
        return obj if self.owns(obj) else _Writer(self, obj)

    def setattr(self, obj: Any, name: str, value: Any) -> None:
        setattr(self.write(obj), _settable(name, "setattr"), value)

    def delattr(self, obj: Any, name: str) -> None:
        delattr(self.write(obj), _settable(name, "delattr"))

    # -- imports and classes

    def _import(self, name: str) -> types.ModuleType:
        if name in STUDENT_FILES:
            return self.load_sibling(name)
        if name not in ALLOWED_MODULES:
            raise ImportError(f"import {name}: only torch and a few standard modules may be imported ({RULES})",
                              name=name)
        return importlib.import_module(name)

    def import_(self, name: str, bind_leaf: bool) -> types.ModuleType:
        """``import name`` (binds the top package) or ``import name as x`` (binds the module itself)."""
        module = self._import(name)
        return module if bind_leaf or name in STUDENT_FILES else sys.modules[name.split(".")[0]]

    def import_from(self, name: str, members: tuple[str, ...]) -> tuple[Any, ...]:
        """``from name import members``: each member read through :meth:`getattr` (or an allowed submodule)."""
        module = self._import(name)
        found = []
        for member in members:
            if member == "*":
                raise PolicyError(f"from {name} import * is not allowed ({RULES})")
            if f"{name}.{member}" in ALLOWED_MODULES:
                found.append(importlib.import_module(f"{name}.{member}"))
            else:
                found.append(self.getattr(module, member))
        return tuple(found)

    def register_class(self, cls: Any) -> Any:
        if isinstance(cls, type):
            STUDENT_CLASSES.add(cls)
            _ALLOWED_READS.clear()
            _OWNED_CLASSES.clear()
        return cls

    def call_type(self, *args: Any) -> Any:
        if len(args) != 1:
            raise PolicyError(f"type() with three arguments (building a class) is not allowed; use a class "
                              f"statement ({RULES})")
        return self._checked(type(args[0]), "type(...)")

    # -- the globals of one file

    def globals_for(self, name: str, filename: str) -> dict[str, Any]:
        """The globals a contract file is executed with (its builtins are :func:`safe_builtins`)."""
        return {
            "__name__": name, "__file__": filename, "__builtins__": self.safe_builtins(),
            "_getattr_": self.getattr, "_write_": self.write, "_getitem_": operator.getitem,
            "_getiter_": iter, "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
            "_unpack_sequence_": guarded_unpack_sequence, "_apply_": lambda f, *a, **k: f(*a, **k),
            "_inplacevar_": _inplace, "_print_": _Printer, "_class_": self.register_class,
            "_import_": self.import_, "_import_from_": self.import_from,
        }

    def safe_builtins(self) -> dict[str, Any]:
        names = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
        names.update(getattr=self.getattr, hasattr=self.hasattr, setattr=self.setattr, delattr=self.delattr,
                     type=self.call_type)
        for refused in REFUSED_BUILTINS:
            names[refused] = _refused_builtin(refused)
        return names


def _settable(name: Any, builtin: str) -> str:
    """``name`` if ``setattr``/``delattr`` may take it (a string, no double underscore), else PolicyError."""
    if type(name) is not str or name.startswith("__"):
        raise PolicyError(f"{builtin}(..., {name!r}, ...) is not allowed ({RULES})")
    return name


class _Writer:
    """Write access to an object the submission did not create: containers' items, tensors' public
    attributes and items; nothing else."""

    __slots__ = ("_guards", "_target")

    def __init__(self, guards: Guards, target: Any) -> None:
        object.__setattr__(self, "_guards", guards)
        object.__setattr__(self, "_target", target)

    def _refuse(self, what: str) -> PolicyError:
        target = object.__getattribute__(self, "_target")
        return PolicyError(f"{what} of {type(target).__name__} is not allowed: a submission may change only its own "
                           f"objects, containers and tensors ({RULES})")

    def __setattr__(self, name: str, value: Any) -> None:
        target = object.__getattribute__(self, "_target")
        if not isinstance(target, torch.Tensor) or name.startswith("_"):
            raise self._refuse(f"changing .{name}")
        setattr(target, name, value)

    def __delattr__(self, name: str) -> None:
        raise self._refuse(f"deleting .{name}")

    def _items(self) -> Any:
        target = object.__getattribute__(self, "_target")
        if not isinstance(target, (dict, list, set, bytearray, collections.deque, torch.Tensor)):
            raise self._refuse("changing items")
        return target

    def __setitem__(self, key: Any, value: Any) -> None:
        self._items()[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._items()[key]


class _Printer:
    """RestrictedPython's ``print``: straight to standard output (the grader records it per test)."""

    def __init__(self, _getattr: Any = None) -> None:
        pass

    @staticmethod
    def _call_print(*objects: Any, **kwargs: Any) -> None:
        print(*objects, **kwargs)


_INPLACE = {"+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
            "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "<<=": operator.ilshift,
            ">>=": operator.irshift, "|=": operator.ior, "^=": operator.ixor, "&=": operator.iand,
            "@=": operator.imatmul}


def _inplace(op: str, target: Any, value: Any) -> Any:
    return _INPLACE[op](target, value)


def _refused_builtin(name: str) -> Callable[..., Any]:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise PolicyError(f"{name}() is not available to a submission ({RULES})")
    return refuse


SAFE_BUILTINS = (
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "classmethod", "complex",
    "dict", "dir", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "id", "int",
    "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object", "oct", "ord", "pow",
    "property", "range", "repr", "reversed", "round", "set", "slice", "sorted", "staticmethod", "str", "sum",
    "super", "tuple", "zip", "print", "__build_class__",
    # C code (torch's included) imports through the builtins of the frame that runs: keep the real one there.
    # Submitted code cannot name it (double underscores): its own imports are compiled into guard calls.
    "__import__", "None", "True", "False", "NotImplemented", "Ellipsis",
    "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "DeprecationWarning", "Exception",
    "FloatingPointError", "ImportError", "IndexError", "KeyError", "LookupError", "NameError",
    "NotImplementedError", "OverflowError", "RuntimeError", "RuntimeWarning", "StopIteration", "TypeError",
    "UserWarning", "ValueError", "Warning", "ZeroDivisionError", "PermissionError",
)
REFUSED_BUILTINS = ("eval", "exec", "compile", "globals", "locals", "vars", "open", "input", "breakpoint", "help",
                    "memoryview", "exit", "quit")
