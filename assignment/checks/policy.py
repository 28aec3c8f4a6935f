"""The language a submitted file is written in: Python, compiled so that every access is guarded.

Why: your code runs in the same Python process as the code that observes it, and
Python hides nothing from code running inside it.  A list of refused forms is beaten
by the next form (``getattr`` under another name, ``operator.attrgetter``, a ``match``
class pattern, ``str.format``...), so the grader does not list forms.  It compiles
``loss_scaler.py`` and ``amp_step.py`` with RestrictedPython (the Zope project's
library built for exactly this) and a policy of its own:

* **every** attribute read becomes ``_getattr_(obj, "name")``, every attribute or item
  write goes through ``_write_(obj)``, every import through a guarded ``__import__``,
  every ``*args`` call, iteration and unpacking through guards;
  :mod:`checks.guards` decides each access by what the object *is*, never by what a
  variable is called;
* what cannot be guarded at run time is refused here, when the file is compiled:
  double-underscore names and attributes (except a few everyday ones such as
  ``__init__``, ``__name__`` and ``super().__init__``), frame and code attributes,
  ``match`` class patterns that read attributes, ``async``, ``except*``, class keywords
  such as ``metaclass=``, and the names the guards themselves use (``_getattr_``...).

A file that does not compile under the policy is not run; every test that needs it
fails with the line and the reason.  ``answers.py`` is never compiled nor run: its
answers are read as literal strings (:func:`checks.rules.parse_answers`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from RestrictedPython.transformer import INSPECT_ATTRIBUTES, IOPERATOR_TO_STR, RestrictingNodeTransformer, copy_locations

#: Double-underscore attributes that may be read (``self.__class__.__name__``, ``super().__init__``...).
READ_DUNDERS = frozenset({
    "__init__", "__post_init__", "__class__", "__name__", "__qualname__", "__doc__", "__len__", "__iter__",
    "__next__", "__enter__", "__exit__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__",
    "__repr__", "__str__", "__getitem__", "__setitem__", "__contains__", "__bool__", "__float__", "__int__",
    "__call__",
})
#: Double-underscore methods a class of yours may define.  Hooks into the interpreter's or torch's machinery
#: (``__getattr__``, ``__torch_function__``, ``__init_subclass__``, ``__get__``, ``__del__``, ``__reduce__``...)
#: are not among them.
DEFINE_DUNDERS = READ_DUNDERS - {"__class__", "__name__", "__qualname__", "__doc__"} | {"__slots__"}
#: Double-underscore names a file may use as plain names (``if __name__ == "__main__":``, ``__slots__ = ...``).
NAME_DUNDERS = frozenset({"__name__", "__slots__", "__all__"})
#: Attributes refused whatever they are read from: frames, code, tracebacks, generators' internals.
FRAME_ATTRIBUTES = frozenset(INSPECT_ATTRIBUTES) | {
    "f_lasti", "f_lineno", "f_trace_lines", "tb_lasti", "tb_lineno", "gi_running", "gi_suspended", "ag_frame",
    "ag_code", "ag_await", "co_consts", "co_names", "co_varnames",
}
#: Names the policy's guards and RestrictedPython's own temporaries use: not yours to bind or read.
_RESERVED = re.compile(r"^(_.*_|_print|_tmp\d+)$")
#: Classes a ``match`` class pattern may name with one positional sub-pattern (which matches the subject itself).
MATCHABLE_BUILTINS = frozenset({"bool", "bytearray", "bytes", "dict", "float", "frozenset", "int", "list", "set",
                                "str", "tuple"})
#: Guard functions the compiled code calls (see :mod:`checks.guards`).
CLASS_GUARD = "_class_"
#: The construct of the violation :func:`compile_file` reports for a file Python cannot parse.
SYNTAX_ERROR = "syntax error"


@dataclass(frozen=True)
class Violation:
    """One construct the policy refuses: where it is and why."""

    line: int
    construct: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.construct} — {self.reason}"


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


class PolicyTransformer(RestrictingNodeTransformer):
    """RestrictedPython's transformer with this course's policy.

    Differences from RestrictedPython's default, each because honest solutions need it:
    single-underscore names and attributes are allowed (``self._scale``; the guards
    decide at run time whose private attributes may be read), augmented assignment of
    attributes and items (``self._tracker += 1``) is rewritten into guarded reads and
    writes, annotated assignments (dataclasses), ``nonlocal``, ``...`` and ``match``
    on plain values are allowed, and classes are registered with the guards (so that
    their instances count as yours) instead of being built by a ``__metaclass__``.
    """

    def __init__(self, errors: list[str] | None = None, warnings: list[str] | None = None,
                 used_names: dict[str, bool] | None = None) -> None:
        super().__init__(errors, warnings, used_names)
        self.violations: list[Violation] = []

    # -- reporting

    def refuse(self, node: ast.AST, construct: str, reason: str) -> None:
        self.violations.append(Violation(getattr(node, "lineno", 0) or 0, construct, reason))
        self.errors.append(f"Line {getattr(node, 'lineno', 0)}: {construct}: {reason}")

    def error(self, node: ast.AST, info: str) -> None:  # RestrictedPython's own refusals
        construct = type(node).__name__ if not isinstance(node, ast.Name) else node.id
        self.refuse(node, construct, info.rstrip("."))

    # -- names

    def check_name(self, node: ast.AST, name: str | None, allow_magic_methods: bool = False) -> None:
        if name is None or name == "_":
            return
        if _dunder(name) or name.startswith("__"):
            magic = allow_magic_methods and name in DEFINE_DUNDERS and getattr(node, "col_offset", 0) != 0
            if not (magic or name in NAME_DUNDERS):
                self.refuse(node, name, "double-underscore names like this one are not allowed")
        elif _RESERVED.match(name):
            self.refuse(node, name, "names that start and end with '_' are reserved for the grader")
        elif name in ("printed", "builtins", "breakpoint"):
            self.refuse(node, name, "this name is reserved")

    # -- attributes

    def _check_attribute(self, node: ast.AST, attr: str, ctx: ast.expr_context) -> None:
        if attr in FRAME_ATTRIBUTES:
            self.refuse(node, f".{attr}", "frame, code and generator internals are not allowed")
        elif _dunder(attr) and (not isinstance(ctx, ast.Load) or attr not in READ_DUNDERS):
            self.refuse(node, f".{attr}", "double-underscore attributes like this one are not allowed")
        elif attr.startswith("__") and not _dunder(attr):
            self.refuse(node, f".{attr}", "name-mangled attributes are not allowed; use one leading underscore")

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        self._check_attribute(node, node.attr, node.ctx)
        node = self.node_contents_visit(node)
        if isinstance(node.ctx, ast.Load):
            call = ast.Call(func=ast.Name("_getattr_", ast.Load()), args=[node.value, ast.Constant(node.attr)],
                            keywords=[])
            copy_locations(call, node)
            return call
        writer = ast.Call(func=ast.Name("_write_", ast.Load()), args=[node.value], keywords=[])
        copy_locations(writer, node.value)
        node.value = writer
        return node

    # -- statements honest code uses that RestrictedPython refuses by default

    def visit_Module(self, node: ast.Module) -> Any:
        """As RestrictedPython's, but ``print``'s collector goes after the docstring and ``__future__`` imports
        (RestrictedPython puts it before a docstring, where ``from __future__`` then no longer compiles)."""
        node = self.node_contents_visit(node)
        position = 0
        for position, child in enumerate(node.body):  # noqa: B007 - the first statement that is neither
            docstring = position == 0 and isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant) \
                and isinstance(child.value.value, str)
            future = isinstance(child, ast.ImportFrom) and child.module == "__future__"
            if not (docstring or future):
                break
        else:
            position = len(node.body)
        self.inject_print_collector(node, position)
        return node

    def visit_Constant(self, node: ast.Constant) -> Any:
        return self.node_contents_visit(node)  # `...` too (stubs, Tuple[int, ...])

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        return self.node_contents_visit(node)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> Any:
        for name in node.names:
            self.check_name(node, name)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        """``a.b += c`` -> ``t = a; _write_(t).b = _inplacevar_("+=", _getattr_(t, "b"), c)``
        (and likewise for items): the object is evaluated once, the read and the write are guarded."""
        if isinstance(node.target, ast.Name):
            return super().visit_AugAssign(node)
        target = node.target
        if isinstance(target, ast.Attribute):
            self._check_attribute(target, target.attr, ast.Store())
        elif not isinstance(target, ast.Subscript):  # pragma: no cover - the grammar allows nothing else
            self.not_allowed(node)
            return node

        def name(identifier: str) -> ast.Name:
            return ast.Name(identifier, ast.Load())

        def call(function: str, *args: ast.expr) -> ast.Call:
            return ast.Call(func=name(function), args=list(args), keywords=[])

        holder = self.gen_tmp_name()  # the user's expressions are visited (guarded); the glue is not
        statements: list[ast.stmt] = [ast.Assign(targets=[ast.Name(holder, ast.Store())], value=self.visit(target.value))]
        if isinstance(target, ast.Attribute):
            read = call("_getattr_", name(holder), ast.Constant(target.attr))
            store: ast.expr = ast.Attribute(value=call("_write_", name(holder)), attr=target.attr, ctx=ast.Store())
        else:
            key = self.gen_tmp_name()
            statements.append(ast.Assign(targets=[ast.Name(key, ast.Store())],
                                         value=self.visit(self.transform_slice(target.slice))))
            read = call("_getitem_", name(holder), name(key))
            store = ast.Subscript(value=call("_write_", name(holder)), slice=name(key), ctx=ast.Store())
        value = call("_inplacevar_", ast.Constant(IOPERATOR_TO_STR[type(node.op)]), read, self.visit(node.value))
        statements.append(ast.Assign(targets=[store], value=value))
        for statement in statements:
            copy_locations(statement, node)
        return statements

    def visit_Import(self, node: ast.Import) -> Any:
        """``import a.b as c`` -> ``c = _import_("a.b", True)``; ``import a.b`` -> ``a = _import_("a.b", False)``.

        Imports are calls of a guard rather than ``IMPORT_NAME``, whose ``__import__`` C code shares."""
        self.check_import_names(node)
        statements = []
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            value = ast.Call(func=ast.Name("_import_", ast.Load()),
                             args=[ast.Constant(alias.name), ast.Constant(bool(alias.asname))], keywords=[])
            statements.append(ast.Assign(targets=[ast.Name(bound, ast.Store())], value=value))
        for statement in statements:
            copy_locations(statement, node)
        return statements

    def visit_ImportFrom(self, node: ast.ImportFrom) -> Any:
        """``from m import x as y, z`` -> ``(y, z) = _import_from_("m", ("x", "z"))``
        (``from __future__ import ...`` stays a statement: it is read by the compiler)."""
        self.check_import_names(node)
        if node.module == "__future__":
            return node
        if node.level:
            self.refuse(node, f"from {'.' * node.level}{node.module or ''} import ...",
                        "relative imports are not allowed; write `import loss_scaler`")
            return node
        targets = ast.Tuple([ast.Name(alias.asname or alias.name, ast.Store()) for alias in node.names], ast.Store())
        value = ast.Call(func=ast.Name("_import_from_", ast.Load()),
                         args=[ast.Constant(node.module), ast.Tuple([ast.Constant(a.name) for a in node.names],
                                                                   ast.Load())], keywords=[])
        statement = ast.Assign(targets=[targets], value=value)
        copy_locations(statement, node)
        return statement

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        """Plain ``class`` statements, registered with the guards first and last (a decorator may
        return a new class, e.g. ``@dataclass(slots=True)``); class keywords are refused."""
        self.check_name(node, node.name)
        if node.keywords:
            self.refuse(node, f"class {node.name}(..., {node.keywords[0].arg}=...)",
                        "class keywords (metaclass=...) are not allowed")
        node = self.node_contents_visit(node)
        first, last = ast.Name(CLASS_GUARD, ast.Load()), ast.Name(CLASS_GUARD, ast.Load())
        for decorator in (first, last):
            copy_locations(decorator, node)
        node.decorator_list = [first, *node.decorator_list, last]
        return node

    # -- match statements: values, sequences, mappings and bare class checks only

    def visit_Match(self, node: ast.AST) -> Any:
        return self.node_contents_visit(node)

    def visit_match_case(self, node: ast.AST) -> Any:
        return self.node_contents_visit(node)

    def visit_MatchValue(self, node: ast.AST) -> Any:
        return self.node_contents_visit(node)

    def visit_MatchSingleton(self, node: ast.AST) -> Any:
        return self.node_contents_visit(node)

    def visit_MatchSequence(self, node: ast.AST) -> Any:
        return self.node_contents_visit(node)

    def visit_MatchMapping(self, node: ast.AST) -> Any:
        self.check_name(node, getattr(node, "rest", None))
        return self.node_contents_visit(node)

    def visit_MatchStar(self, node: ast.AST) -> Any:
        self.check_name(node, getattr(node, "name", None))
        return node

    def visit_MatchAs(self, node: ast.AST) -> Any:
        self.check_name(node, getattr(node, "name", None))
        return self.node_contents_visit(node)

    def visit_MatchOr(self, node: ast.AST) -> Any:
        return self.node_contents_visit(node)

    def visit_MatchClass(self, node: Any) -> Any:
        """``case int():`` and ``case float(x):`` only: other class patterns read attributes unguarded."""
        builtin = isinstance(node.cls, ast.Name) and node.cls.id in MATCHABLE_BUILTINS
        if node.kwd_patterns or len(node.patterns) > (1 if builtin else 0):
            self.refuse(node, "case Class(...)", "class patterns with sub-patterns read attributes; "
                                                 "match the class alone and read attributes in the case body")
        return self.node_contents_visit(node)


def compile_file(source: str, filename: str) -> tuple[Any, list[Violation]]:
    """Compile ``source`` under the policy: ``(code, [])``, or ``(None, violations)``.

    A syntax error is returned as a violation too (the file cannot run either way).
    """
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        return None, [Violation(exc.lineno or 0, SYNTAX_ERROR, exc.msg)]
    except (ValueError, RecursionError) as exc:
        return None, [Violation(0, "unreadable source", str(exc)[:200])]
    policy = PolicyTransformer()
    try:
        policy.visit(tree)
    except RecursionError:
        return None, [Violation(0, "unreadable source", "the file is nested too deeply to check")]
    if policy.violations or policy.errors:
        found = policy.violations or [Violation(0, "construct", error) for error in policy.errors]
        unique = {(v.line, v.construct, v.reason): v for v in found}
        return None, sorted(unique.values(), key=lambda v: (v.line, v.construct))
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec", dont_inherit=True), []


def refusals(source: str, filename: str) -> list[Violation]:
    """What the policy refuses in ``source`` (empty for a file that compiles; syntax errors are not refusals)."""
    _, violations = compile_file(source, filename)
    return [v for v in violations if v.construct != SYNTAX_ERROR]

