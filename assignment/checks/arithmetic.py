"""One floating-point arithmetic on every x86-64 CPU: what makes a recorded answer true on another machine.

torch computes on the CPU with kernels it picks by the processor (ATen's ``DEFAULT``, ``AVX2``, ``AVX512``: vector
widths change the order of a sum), and MKL, its matrix product, picks a code path likewise.  The answers the checks
compare bit for bit (the recorded Task-2 effects, the diagnosis tables, a replay of the student's own run) would then
hold on the machine that recorded them and not on a classmate's laptop or a TA's server.  So every process that
computes for a check or a grade computes with the portable paths: ATen's ``DEFAULT`` kernels (the same machine code
on every x86-64 processor) and MKL's conditional numerical reproducibility (``MKL_CBWR=COMPATIBLE``: the same
results on every Intel and AMD processor).  Both are read once, when torch first computes and when MKL starts, so
:func:`pin` runs before either (``checks`` and ``autograder`` call it when they are imported) and
:func:`pinned` says whether it came in time.  ``OMP_NUM_THREADS=1`` is set by whoever starts a process (one thread:
one order of a parallel sum).  On ARM the ``DEFAULT`` kernels are the same on every ARM processor, not the x86 ones.
"""

from __future__ import annotations

import os
import sys

#: The environment that fixes the arithmetic; a process started with it computes as the grader does.
PORTABLE = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}


def pin() -> None:
    """Ask for the portable paths in this process (and its children): before torch's first computation."""
    os.environ.update(PORTABLE)


def pinned() -> bool:
    """Whether this process computes with the portable kernels (asks torch, which fixes its choice now)."""
    torch = sys.modules.get("torch")
    if torch is None:
        import torch
    return torch.backends.cpu.get_cpu_capability() == "DEFAULT"
