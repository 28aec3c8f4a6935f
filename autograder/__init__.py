"""Autograder for the mixed-precision (AMP) assignment.  See docs/layout.md.

One folder per job, dependencies pointing one way (``tests/test_import_graph.py`` checks it):

* :mod:`autograder.engine` grades one submission: :func:`autograder.engine.grader.grade_submission`
  is the one door every entry point goes through (intake, sandbox, call plan, judge, results.json);
* :mod:`autograder.sandbox` is the trust boundary: it starts, confines and talks to student processes, and judges
  nothing;
* :mod:`autograder.diagnosis` names the catalogued mistake behind a failing row, and writes the class report;
* :mod:`autograder.batch` grades many (workers, ledger, reports, Slurm) with the engine;
* :mod:`autograder.gpu` grades the GPU part with the engine's sandbox;
* :mod:`autograder.platforms` is each course platform's runtime (Gradescope's ``run_autograder``);
* :mod:`autograder.packaging` builds what the platforms and students are given (zips, notebooks, release);
* :mod:`autograder.cli` is ``python -m autograder``.

The public checks (``assignment/checks``) are the package ``checks``, installed beside this one
(pyproject.toml maps it); its subpackages name the trust boundary: ``checks.student`` runs only in
the student's process, ``checks.judge`` only in the judge's, ``checks.runners`` in both.
"""

from __future__ import annotations

import os
from pathlib import Path

# numpy's OpenBLAS (imported with torch, and by the similarity report) starts a thread per core that spins for a
# tenth of a second of CPU before it sleeps, and nothing here hands it work (torch computes with its own BLAS):
# one thread, unless the caller chose.  Read once, when numpy loads; student processes get a clean environment.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import checks  # noqa: E402,F401 - pins the portable arithmetic (checks/arithmetic.py) before torch computes

#: This package's folder: the hidden tests, the call plan and the diagnosis table live below it.
PACKAGE = Path(__file__).resolve().parent
#: The folder holding the package: a checkout's root (with ``solutions/`` and ``tests/``), the
#: Gradescope zip's ``source/``, or site-packages when installed with pip.
ROOT = PACKAGE.parent


def is_checkout() -> bool:
    """Whether :data:`ROOT` is a checkout of the project (not site-packages or the Gradescope zip)."""
    return (ROOT / "pyproject.toml").is_file() or (ROOT / ".git").exists()
