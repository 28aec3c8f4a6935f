"""The grader's import graph: no circle, and every arrow points down the layer table below.

Modules are found by walking ``autograder/`` and ``assignment/checks/`` (subpackages included),
and every ``import`` counts, at module level or inside a function: a deferred import is still an
arrow that ties the two modules' fates together.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: (package folder's parent, top-level package name) of each tree whose modules are graphed.
TREES = ((ROOT, "autograder"), (ROOT / "assignment", "checks"))

#: Each layer and the layers it may import (besides itself), and through them every layer beneath them
#: (:func:`beneath`).  Written by hand: a new arrow up is a design decision, made here, not found out by a
#: circle at import time.  ``checks`` ships to students without the grader, so it may import nothing of it.
ALLOWED: dict[str, set[str]] = {
    "checks": set(),
    # the package itself: where it is (PACKAGE, ROOT), and the portable arithmetic pinned before torch computes
    "autograder": {"checks"},
    # where the grader's files are: the two packages' folders
    "autograder.locations": {"checks", "autograder"},
    "autograder.settings": {"autograder", "autograder.locations"},
    # which build of torch an install takes (make setup runs it before the venv holds anything)
    "autograder.torch_install": set(),
    # the grader's message tables (beside the students' own, checks.words): beneath the sandbox, which speaks them
    "autograder.engine.strings": {"checks"},
    "autograder.engine.judge_words": {"checks"},
    # the trust boundary: starts, confines and talks to student processes; judges nothing
    "autograder.sandbox": {"checks", "autograder", "autograder.locations", "autograder.settings",
                           "autograder.engine.strings", "autograder.engine.judge_words"},
    "autograder.engine": {"checks", "autograder", "autograder.locations", "autograder.settings", "autograder.sandbox"},
    "autograder.diagnosis": {"checks", "autograder", "autograder.locations", "autograder.settings", "autograder.engine"},
    "autograder.batch": {"checks", "autograder", "autograder.locations", "autograder.settings", "autograder.engine",
                         "autograder.diagnosis"},
    "autograder.gpu": {"checks", "autograder", "autograder.locations", "autograder.settings", "autograder.engine",
                       "autograder.diagnosis", "autograder.batch"},
    # a platform's runtime grades one submission through the engine's door, diagnosed
    "autograder.platforms": {"checks", "autograder", "autograder.locations", "autograder.settings",
                             "autograder.engine", "autograder.diagnosis"},
    "autograder.packaging": {"checks", "autograder", "autograder.locations", "autograder.settings", "autograder.engine",
                             "autograder.diagnosis", "autograder.batch", "autograder.gpu", "autograder.torch_install"},
    "autograder.cli": {"checks", "autograder", "autograder.locations", "autograder.settings", "autograder.engine",
                       "autograder.diagnosis", "autograder.batch", "autograder.gpu", "autograder.packaging"},
    "autograder.__main__": {"autograder.cli"},
    # the hidden tests run inside grading, beside the public checks
    "autograder.hidden": {"checks", "autograder", "autograder.settings", "autograder.engine"},
}

def module_files() -> dict[str, Path]:
    """Every module of the graphed trees, by dotted name (a package by its own name)."""
    found = {}
    for parent, top in TREES:
        for path in sorted((parent / top).rglob("*.py")):
            parts = path.relative_to(parent).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imported_names(path: Path, module: str) -> set[str]:
    """Every dotted name ``path`` imports, anywhere in it (``from a import b`` gives both ``a`` and ``a.b``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    """Module -> the graphed modules it imports (a name resolves to the longest module it names)."""
    modules = module_files()
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported in imported_names(path, name):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def layer(module: str) -> str:
    """The layer of a module: the longest key of :data:`ALLOWED` that is the module or a package above it."""
    candidates = [key for key in ALLOWED if module == key or module.startswith(key + ".")]
    assert candidates, f"{module} is in no layer: add its layer to ALLOWED"
    return max(candidates, key=len)


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle (its modules, the first repeated at the end), or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = 2
        path.pop()
        return []

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return []


def test_modules_are_found_in_every_tree_and_subpackage() -> None:
    modules = module_files()
    assert {"autograder.engine.results", "autograder.batch.similarity", "autograder.diagnosis.match",
            "checks.judge.diagnose", "checks.runners.harness", "checks.student.serve", "checks"} <= set(modules)
    assert layer("autograder.engine.results") == "autograder.engine"
    assert layer("checks.runners.anything") == "checks"


def test_imports_are_resolved_relative_and_deferred(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    source = package / "mod.py"
    source.write_text("import os.path\nfrom . import sibling\nfrom ..up import x as y\n"
                      "def f():\n    from autograder.engine import results\n")
    assert imported_names(source, "top.pkg.mod") == {
        "os.path", "top.pkg", "top.pkg.sibling", "top.up", "top.up.x", "autograder.engine",
        "autograder.engine.results"}


def test_cycle_finder_finds_a_circle_and_accepts_a_tree() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_module_imports_itself_back_through_others() -> None:
    assert find_cycle(import_graph()) == []


def beneath(key: str) -> set[str]:
    """The layers ``key`` may import: those :data:`ALLOWED` names, and every layer beneath each of them."""
    found: set[str] = set()
    waiting = list(ALLOWED[key])
    while waiting:
        if (below := waiting.pop()) not in found:
            found.add(below)
            waiting.extend(ALLOWED[below])
    return found


def upward_arrows(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The imports the layer table does not allow."""
    return {(source, target) for source, targets in graph.items() for target in targets
            if layer(source) != layer(target) and layer(target) not in beneath(layer(source))}


def test_every_import_points_down_the_layer_table() -> None:
    assert sorted(upward_arrows(import_graph())) == []


def test_the_sandbox_imports_nothing_that_judges() -> None:
    assert beneath("autograder.sandbox") & {"autograder.engine", "autograder.diagnosis", "autograder.batch"} == set()
    assert "autograder.sandbox" in beneath("autograder.batch")  # through the engine
    assert layer("autograder.engine.strings") == "autograder.engine.strings"


def test_an_arrow_up_is_found() -> None:
    graph = {"autograder.engine.results": {"autograder.diagnosis.match"}, "autograder.diagnosis.match": set(),
             "checks.diagnose": {"autograder.engine.results"}}
    assert upward_arrows(graph) == {("autograder.engine.results", "autograder.diagnosis.match"),
                                    ("checks.diagnose", "autograder.engine.results")}
