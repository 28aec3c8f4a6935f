"""Slurm's refusals as one line a TA can act on (instead of submitit's traceback).

When ``sbatch`` refuses the job array (memory, CPUs, time or partition the cluster cannot
give), submitit raises ``FailedJobError`` carrying sbatch's stderr.  :func:`rejection_message`
says what was asked, what the cluster said and which option to change; the batch raises it
as a usage error (exit status 2).
"""

from __future__ import annotations

import contextlib
import io
import sys
from typing import Any, Iterator, Mapping

#: (words in sbatch's message, the option that changes it); first match wins
HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("memory", "mem "), "--slurm-mem-gb"),
    (("cpu", "processor", "core"), "--slurm-cpus"),
    (("time limit", "time_limit", "walltime"), "--slurm-time"),
    (("partition",), "--slurm-partition"),
    (("array", "maxarraysize", "max_array"), "--slurm-chunk"),
)


def what_was_asked(parameters: Mapping[str, Any]) -> str:
    asked = [f"{parameters.get('mem_gb', '?'):g} GB memory" if isinstance(parameters.get("mem_gb"), (int, float))
             else "default memory",
             f"{parameters.get('cpus_per_task', '?')} CPU(s) per task",
             f"{parameters.get('timeout_min', '?')} min per task",
             f"partition {parameters['slurm_partition']}" if parameters.get("slurm_partition") else "the default partition"]
    return ", ".join(asked)


def cluster_said(error: BaseException) -> str:
    """sbatch's own error lines, joined (its last 'error:' lines carry the reason)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()] or lines[-2:]
    said = "; ".join(dict.fromkeys(errors)) or type(error).__name__
    return said if len(said) <= 400 else said[:397] + "..."


def rejection_message(error: BaseException, parameters: Mapping[str, Any]) -> str:
    """One line: what was asked, what the cluster said, which option to change."""
    said = cluster_said(error)
    lowered = said.lower()
    option = next((option for words, option in HINTS if any(word in lowered for word in words)), None)
    fix = (f"change {option}" if option else
           "check --slurm-mem-gb, --slurm-cpus, --slurm-time and --slurm-partition against `sinfo -o '%P %m %c %l'`")
    return f"Slurm refused the grading jobs (asked for {what_was_asked(parameters)}): {said}; {fix}."


@contextlib.contextmanager
def sbatch_chatter() -> Iterator[None]:
    """Hold back what is written to stderr meanwhile: shown again unless a usage error (the one line) ends it."""
    held = io.StringIO()
    shown = True
    try:
        with contextlib.redirect_stderr(held):
            yield
    except Exception as exc:  # noqa: BLE001 - re-raised
        shown = type(exc).__name__ != "UsageError"
        raise
    finally:
        if shown and held.getvalue():
            sys.stderr.write(held.getvalue())
