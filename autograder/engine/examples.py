"""How many hypothesis examples each hidden property test explores.

Each count is set from a measurement (``make example-counts``, recorded in docs/example-counts.json and
docs/validation.md): the smallest count from which the test catches every catalogued bug and sampled mutant that
it catches with 100, times :data:`MARGIN`, within :data:`CEILING`.  Examples cost time in every student's
grading (each is a round of calls to the student process), so a test explores as many as finding bugs needs and
no more.  ``AMP_HIDDEN_EXAMPLES`` set to a number gives every hidden property test that count instead (tests and
the measurement itself use it).  The public checks keep their own 25 (assignment/checks/plugin.py).
"""

from __future__ import annotations

import ast
import os
from functools import lru_cache
from pathlib import Path

from autograder import settings as grader_settings

#: Each count is at least this many times the measured need.
MARGIN = 2
#: No test explores more than this (what every test explored before the measurement).
CEILING = 100

#: Examples per hidden property test (a test not listed here, or a new one, explores :data:`CEILING`).
COUNTS: dict[str, int] = {}


def count_for(test: str) -> int:
    """The examples ``test`` explores in this run."""
    forced = os.environ.get(grader_settings.HIDDEN_EXAMPLES.env)
    return int(forced) if forced else COUNTS.get(test, CEILING)


@lru_cache(maxsize=None)
def property_tests(folder: Path | None = None) -> tuple[str, ...]:
    """The hidden tests that take hypothesis examples (decorated with ``given``), read from their source."""
    names: list[str] = []
    for path in sorted(Path(folder or grader_settings.hidden_tests()).glob("test_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and any(
                    _name(decorator) == "given" for decorator in node.decorator_list):
                names.append(node.name)
    return tuple(names)


def _name(decorator: ast.expr) -> str:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


PROPERTY_TESTS = property_tests()
