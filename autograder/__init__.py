"""Autograder for the mixed-precision (AMP) assignment.  See README.md.

The public checks (``assignment/checks``) are imported as the package ``checks``;
this makes them importable wherever the grader runs from.
"""

from __future__ import annotations

import sys
from pathlib import Path

_CHECKS_PARENT = str(Path(__file__).resolve().parent.parent / "assignment")
if _CHECKS_PARENT not in sys.path:
    sys.path.insert(0, _CHECKS_PARENT)
