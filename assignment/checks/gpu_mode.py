"""Dry mode or real GPU mode: the one parser of "dry" (no torch import; the grader uses it too).

``1``/``true``/``yes``/``on`` mean the CPU dry run; ``0``/``false``/``no``/``off`` and the
empty string mean the real GPU run.  Anything else is an error, never a guess: a typo
must not turn a GPU grading run into CPU grades without a speed check.  The Makefile
(``DRY=...``), the command line (``--dry [VALUE]``), ``$AMP_GPU_DRY`` and the GPU
checks all go through :func:`parse_dry`.
"""

from __future__ import annotations

import os

DRY_ENV = "AMP_GPU_DRY"
_DRY = ("1", "true", "yes", "on")
_REAL = ("", "0", "false", "no", "off")


def parse_dry(text: str | None) -> bool:
    """True for the dry mode, False for the real GPU mode; ValueError for anything else."""
    value = (text or "").strip().lower()
    if value in _DRY:
        return True
    if value in _REAL:
        return False
    raise ValueError(f"dry mode must be one of {', '.join(_DRY)} (dry) or {', '.join(v or repr(v) for v in _REAL)} "
                     f"(real GPU run), not {text!r}")


def dry_from_env() -> bool:
    """The dry mode that ``$AMP_GPU_DRY`` asks for (unset: the real GPU run)."""
    return parse_dry(os.environ.get(DRY_ENV))
