"""What each contract file of one submission did that keeps later calls from running it.

An import that failed, crashed or did not finish is remembered with its message (told once at
the top of the feedback: :mod:`autograder.engine.faults`) and the kind of limit it hit; calls
that hung are counted per file, and once a file reaches ``Limits.hangs_per_module`` of them the
tests needing it fail at once.  Both keep a grade deterministic: a broken file fails the same
tests in every run, and a hanging one costs a bounded time.
"""

from __future__ import annotations

from checks.runners import harness

from autograder.engine.strings import text
from autograder.sandbox import budget
from autograder.sandbox.student_processes import StudentProcess


class FileFaults:
    """Per contract module: why it may not run (and the limit that decided it), and how often it hung."""

    def __init__(self, import_seconds: float, hangs_allowed: int) -> None:
        self.import_seconds = import_seconds
        self.hangs_allowed = hangs_allowed
        self.messages: dict[str, str] = {}  # contract module -> why tests needing it fail at once
        self.kinds: dict[str, str] = {}  # contract module -> limit kind its import hit (budget.LIMIT_KINDS)
        self.hangs: dict[str, int] = {}  # contract module -> calls that timed out while needing it

    def import_failed(self, name: str, message: str, kind: str = "") -> None:
        """Importing ``name`` raised (its message), or hit a limit of ``kind``."""
        self.messages[name] = message[:4000]
        if kind:
            self.kinds[name] = kind

    def import_stopped(self, name: str, process: StudentProcess) -> None:
        """``process`` sent no word while importing ``name``: it ended, computed (for the whole limit, or slowly on a
        shared processor until the wall bound), or waited."""
        file = harness.CONTRACT_FILES[name]
        if process.pid is None:
            self.import_failed(name, text("import_crash", file=file), budget.CRASH_LIMIT)
        else:
            self.import_failed(name, budget.not_finished_message("import", process.computing, self.import_seconds,
                                                                 file=file), budget.TIME_LIMIT)

    def hung(self, needed: tuple[str, ...]) -> None:
        for name in needed:
            self.hangs[name] = self.hangs.get(name, 0) + 1

    def blocking(self, needed: tuple[str, ...]) -> tuple[str, str] | None:
        """(limit kind or "", message) when a file among ``needed`` may not run, else None."""
        for name in needed:
            if name in self.messages:
                return self.kinds.get(name, ""), self.messages[name]
            if self.hangs.get(name, 0) >= self.hangs_allowed:
                return budget.TIME_LIMIT, text("hung_too_often", count=self.hangs[name],
                                                       file=harness.CONTRACT_FILES[name])
        return None
