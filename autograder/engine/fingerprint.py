"""What decides a grade, hashed: the key of a batch's ledger and of a recorded call plan.

A grade depends on the engine's code, the public and hidden tests, the switches read from
the environment (examples, visibility, limits, test hooks, ...) and the versions
of the libraries that run the tests (hypothesis's examples change between its versions).
:func:`digest` hashes files and settings into one hex string; callers add what else is
theirs (the batch its worker and limits, the call plan its reference solution).

A batch keeps the rubric's points apart (:func:`scoring_digest`, :func:`points_digest`): what a row is worth
does not change which cases pass, so a change of points alone rescores stored verdicts without running
student code (:mod:`autograder.batch.rescore`).

Generated tables (the diagnosis tables) are keyed on behaviour instead (:func:`behaviour_digest`): a docstring
or a comment edited in a check does not make them stale, so ``make student`` does not rebuild them; nor do the
catalogued mistakes' words (:data:`WORDS_ONLY`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

from autograder import locations
from autograder import settings as grader_settings
from autograder.engine import rubric

#: Distributions whose version changes what the tests do.
LIBRARIES = ("torch", "hypothesis", "pytest")
#: Top-level assignments that are words, not behaviour, by the file's last path parts: :func:`behaviour_text` leaves
#: them out.  A catalogued mistake's words (``checks.words.MISTAKES``) are looked up when a "Likely mistake" line is
#: rendered; no answer, digest or recorded effect is made from them, so rewording one rebuilds no generated table.
WORDS_ONLY: dict[tuple[str, ...], frozenset[str]] = {("checks", "words.py"): frozenset({"MISTAKES"})}


def grader_files() -> list[Path]:
    """The engine's and the sandbox's code and the public and hidden tests (``$AMP_PUBLIC_TESTS``/``$AMP_HIDDEN_TESTS``
    honoured)."""
    public, hidden = grader_settings.public_tests(), grader_settings.hidden_tests()
    files = [path for folder in (locations.ENGINE, locations.SANDBOX) for path in sorted(folder.rglob("*"))
             if path.suffix in (".py", ".ini")]
    return files + sorted(public.rglob("*.py")) + sorted(hidden.rglob("*.py"))


def settings() -> dict[str, Any]:
    """The settings that change grades (:data:`autograder.settings.GRADE_SETTINGS`), the library versions and
    Python's version."""
    return {"env": {setting.env: grader_settings.raw(setting) for setting in grader_settings.GRADE_SETTINGS}, "versions": dict(_versions()),
            "python": sys.version.split()[0]}


@functools.lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, str | None], ...]:
    return tuple((name, _version(name)) for name in LIBRARIES)


def _version(name: str) -> str | None:
    """``name``'s installed version, as ``importlib.metadata.version`` gives it.

    Read from the name of the one ``NAME-VERSION.dist-info`` folder beside the package, which pip writes: a
    listing of one folder, where importlib.metadata reads every entry of every ``sys.path`` folder (a fortieth of
    a second, in each process that grades).  Any other layout goes to importlib.metadata.
    """
    import importlib.util
    import os

    spec = importlib.util.find_spec(name)
    if spec is not None and spec.origin and spec.submodule_search_locations:
        folder = os.path.dirname(os.path.dirname(spec.origin))
        try:
            found = [entry[:-len(".dist-info")].split("-", 1) for entry in os.listdir(folder)
                     if entry.endswith(".dist-info") and entry.split("-", 1)[0].replace(".", "_").lower() == name]
        except OSError:
            found = []
        if len(found) == 1 and len(found[0]) == 2:
            return found[0][1]
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def digest(files: Iterable[Path], extra: dict[str, Any]) -> str:
    """sha256 over each file's name and bytes (a missing file hashes as such) and ``extra`` as sorted JSON."""
    hashed = hashlib.sha256()
    for file in files:
        hashed.update(b"\0" + file.name.encode() + b"\0")
        try:
            hashed.update(file.read_bytes())
        except OSError:
            hashed.update(b"missing")
    hashed.update(json.dumps(extra, sort_keys=True, default=str).encode())
    return hashed.hexdigest()


def _without_points(path: Path) -> bytes:
    """``rubric.py``'s code with every ``Item``'s points set to 0: what names and places the rows, not their worth.

    An AST dump, so comments and layout do not count either; any other change (a test, a title, a row's
    suite, the code below the table) still does.
    """
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return b"unreadable"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Item":
            if len(node.args) > 3:
                node.args[3] = ast.Constant(0)
            for keyword in node.keywords:
                if keyword.arg == "points":
                    keyword.value = ast.Constant(0)
    return ast.dump(tree).encode()


def scoring_digest(files: Iterable[Path], extra: dict[str, Any]) -> str:
    """:func:`digest` with the rubric's points left out (``rubric.py`` read by :func:`_without_points`, and
    ``$AMP_GPU_POINTS`` dropped from ``extra``'s settings): it changes when what passes may change."""
    files = list(files)
    rubric_file = Path(rubric.__file__).resolve()
    hashed = hashlib.sha256()
    for file in files:
        hashed.update(b"\0" + file.name.encode() + b"\0")
        if file.resolve() == rubric_file:
            hashed.update(_without_points(file))
            continue
        try:
            hashed.update(file.read_bytes())
        except OSError:
            hashed.update(b"missing")
    env = {k: v for k, v in extra.get("env", {}).items() if k != grader_settings.GPU_POINTS.env}
    hashed.update(json.dumps({**extra, "env": env}, sort_keys=True, default=str).encode())
    return hashed.hexdigest()


def points_digest() -> str:
    """Every row's points (``rubric.ITEMS`` and ``rubric.GPU_ITEMS`` as loaded, ``$AMP_GPU_POINTS`` applied)."""
    table = [(item.number, item.test, item.points) for item in rubric.ITEMS + rubric.GPU_ITEMS]
    return hashlib.sha256(json.dumps(table).encode()).hexdigest()[:16]


class _NoDocstrings(ast.NodeTransformer):
    """Drops every statement that is a bare string (docstrings, attribute docstrings): it does nothing when run."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if isinstance(statements, list) and statements and isinstance(statements[0], ast.stmt):
                kept = [s for s in statements if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                                      and isinstance(s.value.value, str))]
                # a body left empty would not parse again: ``pass`` is what it now does
                setattr(node, field, kept or ([ast.Pass()] if field == "body" else []))
        return node


def behaviour_text(path: Path) -> bytes:
    """What ``path`` does, without what it says about itself.

    A Python file: its syntax tree without docstrings (comments and layout are not in a tree) and without the
    assignments :data:`WORDS_ONLY` names, written back by
    ``ast.unparse`` (stable across Python versions, where ``ast.dump``'s text changed in 3.13), then the text of
    each ``@given`` test as hypothesis seeds its examples from it, docstring included (:func:`_hypothesis_keys`).  A file that does
    not parse, or is not Python: its bytes.  A missing file: ``b"missing"``.  Code that reads its own
    ``__doc__`` (an argparse description) would be told apart by its docstring; no table's input does.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return b"missing"
    if path.suffix != ".py":
        return data
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return data
    keys = _hypothesis_keys(tree, data.decode("utf-8", "replace"))
    words = next((names for tail, names in WORDS_ONLY.items() if path.parts[-len(tail):] == tail), frozenset())
    tree.body = [statement for statement in tree.body if not _assigns_only(statement, words)]
    return "\n".join([ast.unparse(_NoDocstrings().visit(tree)), *keys]).encode()


def _assigns_only(statement: ast.stmt, names: frozenset[str]) -> bool:
    """Whether ``statement`` is a plain assignment to ``names`` only (``NAME = ...`` or ``NAME: type = ...``)."""
    if isinstance(statement, ast.AnnAssign):
        targets = [statement.target]
    elif isinstance(statement, ast.Assign):
        targets = statement.targets
    else:
        return False
    return all(isinstance(target, ast.Name) and target.id in names for target in targets)


def is_given(decorator: ast.expr) -> bool:
    """Whether a decorator is hypothesis's ``given`` (bare or as an attribute, called or not)."""
    func = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(func, ast.Name) and func.id == "given") or (isinstance(func, ast.Attribute) and func.attr == "given")


def _hypothesis_keys(tree: ast.AST, source: str) -> list[str]:
    """The source of every ``@given`` test as hypothesis hashes it into the seed of its derandomized examples.

    Its docstring and layout are in that hash (comments and blank lines are not): rewording a ``@given`` test's
    docstring changes the inputs it tries, so the calls a table answers.  The text is cut and cleaned as
    ``hypothesis.internal.reflection._clean_source`` does with ``inspect.getsource``'s block (a test holds the two
    in step): decorators dropped when the block parses alone, then comments, trailing blanks and empty lines.
    """
    lines = source.splitlines(keepends=True)
    keys = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(map(is_given, node.decorator_list)):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            keys.append(hypothesis_source("".join(lines[start - 1:node.end_lineno])))
    return keys


def hypothesis_source(block: str) -> str:
    """A ``@given`` function's source block as hypothesis keys it (see :func:`_hypothesis_keys`)."""
    import io
    import tokenize

    try:
        funcdef = ast.parse(block).body[0]
        block = "".join(block.splitlines(keepends=True)[funcdef.lineno - 1:])
    except (SyntaxError, ValueError, IndexError):
        pass  # an indented method does not parse alone: hypothesis keeps its decorators too
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(block).readline) if t.type != tokenize.COMMENT]
        block = tokenize.untokenize(tokens)
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return "\n".join(line.rstrip() for line in block.splitlines() if line.rstrip())


def behaviour_digest(files: Iterable[Path], extra: dict[str, Any]) -> str:
    """:func:`digest` over each file's :func:`behaviour_text` instead of its bytes.

    Parsing and unparsing the ninety-odd files costs a quarter second, paid by every grading run that checks its
    diagnosis table for staleness, so the result is remembered: in this process and in the grader's cache folder
    (:func:`_remembered`), under :func:`digest` of the same files' bytes, ``extra``, this module's own code and
    Python's version (``ast.unparse`` is Python's): equal bytes, equal behaviour.
    """
    files = list(files)
    key = digest([*files, Path(__file__)], {"extra": extra, "python": sys.version, "memo": "behaviour"})
    return _remembered(key, lambda: _behaviour_digest(files, extra))


def _behaviour_digest(files: list[Path], extra: dict[str, Any]) -> str:
    hashed = hashlib.sha256()
    for file in files:
        hashed.update(b"\0" + file.name.encode() + b"\0")
        hashed.update(behaviour_text(file))
    hashed.update(json.dumps(extra, sort_keys=True, default=str).encode())
    return hashed.hexdigest()


_REMEMBERED: dict[str, str] = {}


def _remembered(key: str, compute: Callable[[], str]) -> str:
    """``compute()``, kept under ``key`` in this process and as ``behaviour-<key>`` in the grader's cache folder
    (the plan cache's, :func:`autograder.settings.plan_cache`: 0700, the file 0600, written atomically).  A file that is
    not this user's alone, or not a digest, is ignored and rewritten; no usable folder costs only the time."""
    if key in _REMEMBERED:
        return _REMEMBERED[key]
    import re

    from autograder.engine.files import read_private, write_bytes_atomic

    path = grader_settings.plan_cache() / f"behaviour-{key[:32]}"
    kept, value = ((read_private(path) or b"")[:200].decode("ascii", "replace").split() + ["", ""])[:2]
    if kept == key and re.fullmatch(r"[0-9a-f]{64}", value):
        _REMEMBERED[key] = value
        return value
    value = _REMEMBERED[key] = compute()
    try:
        write_bytes_atomic(path, f"{key} {value}\n".encode("ascii"), private=True)
    except OSError:
        pass
    return value
