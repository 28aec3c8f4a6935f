"""Static (AST) checks of submission source: read as text, never executed."""

from __future__ import annotations

import ast

FORBIDDEN_NAMES = (
    "GradScaler", "grad_scaler", "_amp_update_scale_", "_amp_foreach_non_finite_check_and_unscale_",
    # Ways around the run-time check: raw bindings, the grader's own reference, stack introspection.
    "_VariableFunctions", "torch_scaler", "_getframe", "f_globals", "f_back",
)


def _mentions(text: str) -> str | None:
    return next((name for name in FORBIDDEN_NAMES if name in text), None)


def forbidden_delegation(source: str) -> list[str]:
    """Lines where ``source`` uses torch's GradScaler or its private AMP kernels.

    Catches attribute access (``torch.amp.GradScaler``), imports (``from torch.amp
    import GradScaler``), bare names, and string literals naming them (as used with
    ``getattr``/``importlib``).  Mentions in comments and docstrings are fine.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    problems: list[str] = []
    for node in ast.walk(tree):
        found: str | None = None
        if isinstance(node, ast.Attribute):
            found = _mentions(node.attr)
        elif isinstance(node, ast.Name):
            found = _mentions(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] + [getattr(node, "module", None) or ""]
            found = next((hit for hit in map(_mentions, names) if hit), None)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found = _mentions(node.value)
        if found:
            problems.append(f"line {node.lineno}: {found}")
    return sorted(set(problems), key=lambda p: int(p.split()[1].rstrip(":")))
