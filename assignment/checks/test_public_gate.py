"""The delegation gate (test 1.17), exactly as the grader runs it.

Task 1 is yours to implement: calling ``torch.amp.GradScaler`` or torch's private ``_amp_*``
kernels from ``loss_scaler.py`` (instantiating or subclassing the class counts) scores all of
Task 1 zero.  The check watches what your code *does*: wherever ``loss_scaler.py`` runs those
are stand-ins that raise and count each call.  Mentioning them in strings, comments, docstrings
or type hints never counts.
"""

from __future__ import annotations

from typing import Any

from checks import behaviours


def test_no_forbidden_delegation(student: Any) -> None:
    behaviours.no_delegation(student)
