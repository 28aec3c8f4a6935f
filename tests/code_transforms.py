"""Source-to-source disguises of a copied submission (tests of the similarity report)."""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import tokenize

def rename_identifiers(code: str) -> str:
    tree = ast.parse(code)
    defined = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store): defined.add(node.id)
        elif isinstance(node, ast.arg) and node.arg not in ("self", "cls"): defined.add(node.arg)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self": defined.add(node.attr)
    mapping = {name: f"renamed_{k}" for k, name in enumerate(sorted(defined)) if not keyword.iskeyword(name) and not hasattr(builtins, name)}
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.NAME and tok.string in mapping:
            tok = tok._replace(string=mapping[tok.string])
        out.append(tok)
    return tokenize.untokenize(out)

def reorder_methods(code: str) -> str:
    tree = ast.parse(code)
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            methods = [n for n in node.body if isinstance(n, ast.FunctionDef)]
            others = [n for n in node.body if not isinstance(n, ast.FunctionDef)]
            node.body = others + methods[::-1]
    funcs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    rest = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    tree.body = rest + funcs[::-1]
    return ast.unparse(tree) + "\n"

def recomment(code: str) -> str:
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT:
            tok = tok._replace(string="# my own note here")
        out.append(tok)
    text = tokenize.untokenize(out)
    lines = []
    for line in text.splitlines():
        lines.append(line.rstrip())
        if line.strip().endswith(":"):
            lines.append(" " * (len(line) - len(line.lstrip()) + 4) + "# step")
    return "\n".join(lines) + "\n"

def reformat(code: str) -> str:
    text = "\n".join(line.replace(" = ", "=").replace(", ", " , ") + ("\n" if line.strip() else "") for line in code.splitlines())
    return text + "\n"


#: one disguise each: a copy edited by a student who wants it not to look copied
TRANSFORMS = {"rename_identifiers": rename_identifiers, "reorder_methods": reorder_methods,
              "recomment": recomment, "reformat": reformat}


def disguise(code: str) -> str:
    """All four disguises at once."""
    return reformat(recomment(reorder_methods(rename_identifiers(code))))
