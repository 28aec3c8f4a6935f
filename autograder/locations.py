"""Where the grader's files are: the same names in a checkout, the Gradescope zip and a pip install.

What grading reads lives in the installed packages (``checks`` and ``autograder``); what only a
checkout has (the reference solution, the catalogue of known bugs) is for building and recording,
and every caller copes with its absence (no call plan: slower, the same grades).
"""

from __future__ import annotations

from pathlib import Path

import checks
from autograder import PACKAGE, ROOT

#: The public checks: pytest files the judge runs with the hidden tests (and students run locally).
PUBLIC_CHECKS = Path(checks.__file__).resolve().parent
#: The hidden tests; the call plan and the diagnosis table are shipped beside them (as secret as they are).
HIDDEN_TESTS = PACKAGE / "hidden"
SHIPPED_PLAN = HIDDEN_TESTS / "plan.json"
SHIPPED_TABLE = HIDDEN_TESTS / "diagnosis.json"
#: The engine's own code and the sandbox's (both part of the grader's fingerprint).
ENGINE = PACKAGE / "engine"
SANDBOX = PACKAGE / "sandbox"
#: A checkout's reference solution (the call plan and the batch's canary are recorded from it).
REFERENCE_SOLUTION = ROOT / "solutions"
#: A checkout's catalogue of known bugs and correct variants (the diagnosis table is built from it).
CATALOGUE = ROOT / "tests" / "catalogue" / "catalogue.py"
