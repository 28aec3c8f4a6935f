"""The rules every submitted file must follow, checked by reading its source (never by running it).

Why rules at all?  Your code runs in the same Python process as the code that
observes it.  Python hides nothing from code running inside it: a frame's
``f_back``, a function's ``__globals__``, ``gc.get_objects()`` or a computed
``getattr`` reach anything, including the checker's own bookkeeping.  So the
grader refuses, before running anything, the handful of constructs that honest
code for this assignment never needs and that such tricks cannot do without:

* imports outside :data:`ALLOWED_IMPORTS` (``torch`` and a few standard modules);
* double-underscore attributes other than :data:`ALLOWED_DUNDERS` (``__dict__``,
  ``__globals__``, ``__subclasses__``, ``__class__.__mro__``...);
* private attributes (``x._name``) of anything but ``self``, ``cls``, ``super()``
  or a name your own file defines (``torch._C``, ``optimizer._hooks``...);
* frame, code and tracing attributes (``f_back``, ``gi_frame``, ``tb_frame``...)
  and the torch entry points that load or generate code (:data:`REFUSED_ATTRIBUTES`);
* ``eval``, ``exec``, ``compile``, ``globals``, ``vars``, ``open``... (:data:`REFUSED_CALLS`),
  and ``getattr``/``setattr``/``delattr``/``hasattr`` with a name that is not a string literal.

``answers.py`` is never run at all: its answers are read as literal strings
(:func:`parse_answers`).  The public checks apply the same rules, so a refused
construct shows up locally, with the line and the reason, before you submit.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

#: Modules a submission may import (and their submodules where marked with ".*").
ALLOWED_IMPORTS = (
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.utils", "torch.optim", "torch.amp", "torch.autograd",
    "torch.cuda", "torch.cuda.amp", "torch.cpu", "torch.cpu.amp", "torch.types",
    "math", "cmath", "numbers", "struct", "array", "decimal", "fractions", "statistics",
    "typing", "typing_extensions", "collections", "collections.abc", "dataclasses", "enum", "abc",
    "functools", "itertools", "operator", "copy", "warnings", "contextlib", "__future__",
    "loss_scaler", "amp_step",  # the submission's own files
)
#: Double-underscore attributes honest code uses; every other one is refused.
ALLOWED_DUNDERS = frozenset({
    "__init__", "__post_init__", "__class__", "__name__", "__qualname__", "__doc__", "__slots__", "__call__",
    "__len__", "__iter__", "__next__", "__enter__", "__exit__", "__eq__", "__ne__", "__hash__", "__repr__",
    "__str__", "__getitem__", "__setitem__", "__contains__", "__bool__", "__float__", "__int__",
})
#: Attributes refused whatever they are read from: frames, code, tracing, and torch's ways to
#: load, compile or generate code (each could reach the checker's objects without naming them).
REFUSED_ATTRIBUTES = frozenset({
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "tb_frame", "tb_next", "gi_frame", "gi_code",
    "cr_frame", "cr_code", "ag_frame", "ag_code", "co_code", "co_consts", "currentframe", "settrace", "setprofile",
    "modules", "ops", "library", "cpp_extension", "load", "jit", "hub", "package", "fx", "compile", "export",
    "overrides", "multiprocessing", "distributed", "serialization", "classes", "sys", "os", "gc", "builtins",
    "inspect", "importlib", "ctypes", "subprocess", "socket",
})
#: Built-in functions refused as calls (and as bare names, so they cannot be passed around).
REFUSED_CALLS = frozenset({
    "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "breakpoint", "open", "input", "help",
    "memoryview", "__builtins__",
})
ATTRIBUTE_FUNCTIONS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
#: Files that are imported and run; ``answers.py`` is only parsed.
RUN_FILES = ("loss_scaler.py", "amp_step.py")
QUESTIONS = ("Q1", "Q2", "Q3", "Q4", "Q5")


@dataclass(frozen=True)
class Violation:
    """One refused construct: where it is and why it is refused."""

    line: int
    construct: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.construct} — {self.reason}"


def _import_allowed(module: str) -> bool:
    return module in ALLOWED_IMPORTS


def _own_names(tree: ast.Module) -> set[str]:
    """Names the file itself binds at module level (its classes, functions and constants)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _private_owner_ok(value: ast.expr, own: set[str]) -> bool:
    """``value._x`` is allowed when ``value`` is self/cls, super(), or a name this file defines."""
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls") or value.id in own
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
        return True
    return False


def _attribute_violation(node: ast.Attribute, own: set[str]) -> str | None:
    name = node.attr
    if name.startswith("__") and name.endswith("__"):
        return None if name in ALLOWED_DUNDERS else "double-underscore attributes like this one are not allowed"
    if name in REFUSED_ATTRIBUTES:
        return "frame, module and code-loading attributes are not allowed"
    if name.startswith("_") and not _private_owner_ok(node.value, own):
        if isinstance(node.value, ast.Name) and node.value.id == "torch" and name.startswith("_foreach_"):
            return None  # torch's public-in-practice fused kernels, e.g. torch._foreach_mul_
        return "private attributes are allowed only on self, cls, super() or names your file defines"
    return None


def _call_violation(node: ast.Call) -> tuple[str, str] | None:
    if not (isinstance(node.func, ast.Name) and node.func.id in ATTRIBUTE_FUNCTIONS):
        return None
    if len(node.args) < 2:
        return None
    name = node.args[1]
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        return (f"{node.func.id}() with a computed name", "write the attribute name as a string literal")
    if node.func.id != "hasattr" and name.value.startswith("_") and not (
            name.value in ALLOWED_DUNDERS or _private_owner_ok(node.args[0], set())):
        return (f"{node.func.id}(..., {name.value!r})", "private and double-underscore names are not allowed here")
    if name.value in REFUSED_ATTRIBUTES:
        return (f"{node.func.id}(..., {name.value!r})", "frame, module and code-loading attributes are not allowed")
    return None


def check_source(source: str, filename: str) -> list[Violation]:
    """Every refused construct in ``source`` (the text of ``filename``), in line order.

    A file with a syntax error has no violations here: importing it reports the error.
    """
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError, RecursionError):
        return []
    own = _own_names(tree)
    found: list[Violation] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _import_allowed(alias.name):
                    found.append(Violation(line, f"import {alias.name}", _IMPORT_REASON))
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if node.level or not _import_allowed(module):
                found.append(Violation(line, f"from {module} import ...", _IMPORT_REASON))
            for alias in node.names:
                if alias.name.startswith("_") and module != "__future__":
                    found.append(Violation(line, f"from {module} import {alias.name}",
                                           "private names cannot be imported"))
        elif isinstance(node, ast.Attribute):
            reason = _attribute_violation(node, own)
            if reason:
                found.append(Violation(line, f".{node.attr}", reason))
        elif isinstance(node, ast.Name) and node.id in REFUSED_CALLS:
            found.append(Violation(line, node.id, "this built-in is not allowed in a submission"))
        elif isinstance(node, ast.Call):
            refused = _call_violation(node)
            if refused:
                found.append(Violation(line, *refused))
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and any(n.startswith("__") for n in node.names):
            found.append(Violation(line, "global " + ", ".join(node.names), "double-underscore names are not allowed"))
    unique = {(v.line, v.construct): v for v in found}
    return sorted(unique.values(), key=lambda v: (v.line, v.construct))


_IMPORT_REASON = "only torch and a few standard modules may be imported (see the handout's rules)"


def explain(filename: str, violations: list[Violation], limit: int = 8) -> str:
    """The student-facing message for a file that breaks the rules (it is then not run)."""
    lines = [f"  {v}" for v in violations[:limit]]
    if len(violations) > limit:
        lines.append(f"  … and {len(violations) - limit} more")
    return (f"{filename} was not run: it uses constructs the grader refuses (see \"Rules for your code\" in the "
            "handout). Every test that needs this file fails until they are removed:\n" + "\n".join(lines))


def _answer_text(value: ast.expr | None) -> str | None:
    """A literal answer as text: strings as they are, other literals as written (``2`` -> "2")."""
    if not isinstance(value, ast.Constant) or value.value is None or value.value is Ellipsis:
        return None
    return (value.value if isinstance(value.value, str) else repr(value.value))[:100]


def parse_answers(source: str | None) -> dict[str, str | None]:
    """The Quick Check answers of ``answers.py``, read as literal strings; the file is never run.

    An answer counts only as a top-level ``Qn = "letter"`` assignment of a string literal;
    anything else (a computed value, ``...``, a missing line) reads as unanswered (None),
    and the last assignment of a question wins, as it would when the file ran.
    """
    answers: dict[str, str | None] = {name: None for name in QUESTIONS}
    if source is None:
        return answers
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return answers
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        for target in targets:
            if isinstance(target, ast.Name) and target.id in answers:
                answers[target.id] = _answer_text(value)
    return answers
