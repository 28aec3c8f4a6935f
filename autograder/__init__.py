"""Autograder for the mixed-precision (AMP) assignment.  See docs/layout.md.

One folder per job, dependencies pointing one way:

* :mod:`autograder.engine` grades one submission (intake, sandbox, judge, rubric, results);
* :mod:`autograder.batch.run` grades many (workers, ledger, reports) with the engine;
* :mod:`autograder.packaging` ships the grader (Gradescope, otter-grader, notebook, release);
* :mod:`autograder.gpu` grades the GPU part with the engine's sandbox;
* :mod:`autograder.diagnosis` names the catalogued mistake a failing row reveals, and writes the class report;
* :mod:`autograder.cli` is ``python -m autograder``.

The public checks (``assignment/checks``) are imported as the package ``checks``;
this makes them importable wherever the grader runs from.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: The project's root (a checkout, or the Gradescope zip's ``source/``).
ROOT = Path(__file__).resolve().parent.parent

_CHECKS_PARENT = str(ROOT / "assignment")
if _CHECKS_PARENT not in sys.path:
    sys.path.insert(0, _CHECKS_PARENT)
