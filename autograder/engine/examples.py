"""How many hypothesis examples each hidden property test explores.

Each count is set from a measurement (``make example-counts``, recorded in docs/example-counts.json and
docs/validation.md): the smallest count from which the test catches every catalogued bug and sampled mutant that
it catches with 100, times :data:`MARGIN`, never below :data:`FLOOR` (what the public checks explore: a hidden
test searches at least as widely as the student's own run) nor above :data:`CEILING`.  Examples cost time in every student's
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
from autograder.engine import fingerprint

#: Each count is at least this many times the measured need.
MARGIN = 2
#: No test explores fewer than the public checks' 25: the measurement's smallest rungs are few and a student's
#: mistake may be none of the measured ones.
FLOOR = 25
#: No test explores more than this (what every test explored before the measurement).
CEILING = 100

#: Examples per hidden property test (a test not listed here, or a new one, explores :data:`CEILING`).
COUNTS: dict[str, int] = {
    "test_update_rule_properties": 25,  # needs 5
    "test_update_rule_non_power_of_two_factors": 25,  # needs 5
    "test_growth_skipped_when_float32_would_overflow": 25,  # needs 5
    "test_update_new_scale_keeps_tracker": 25,  # needs 5
    "test_one_backoff_per_update": 25,  # needs 5
    "test_matches_torch_gradscaler": 100,  # needs 50
    "test_unscale_bit_exact": 100,  # needs 50
    "test_misuse_raises_runtime_error": 25,  # needs 5
    "test_float16_grads_rejected": 25,  # needs 5
    "test_scale_lists_and_tuples": 25,  # needs 5
    "test_state_dict_round_trip": 25,  # needs 5
}


def count_for(test: str) -> int:
    """The examples ``test`` explores in this run."""
    forced = os.environ.get(grader_settings.HIDDEN_EXAMPLES.env)
    return int(forced) if forced else COUNTS.get(test, CEILING)


#: Hidden tests that run hypothesis searches of their own (``find``) with :func:`count_for`'s count, rather than
#: being ``given`` tests: the differential row shrinks a failing sequence before it decides which row it charges.
SEARCHES = ("test_matches_torch_gradscaler",)


@lru_cache(maxsize=None)
def property_tests(folder: Path | None = None) -> tuple[str, ...]:
    """The hidden tests that take hypothesis examples (decorated with ``given``, or named in :data:`SEARCHES`),
    read from their source."""
    names: list[str] = []
    for path in sorted(Path(folder or grader_settings.hidden_tests()).glob("test_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and (any(map(fingerprint.is_given, node.decorator_list))
                                                      or node.name in SEARCHES):
                names.append(node.name)
    return tuple(names)
