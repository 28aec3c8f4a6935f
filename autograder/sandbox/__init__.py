"""The trust boundary: everything that starts, confines, times and talks to a student process.

Nothing outside this folder forks student code.  :mod:`~autograder.sandbox.runner` is the judge's side of
the conversation (one :class:`~autograder.sandbox.runner.SandboxRunner` per submission); the zygote
(:mod:`~autograder.sandbox.zygote`) forks every student process, which confines itself before it reads a byte of
the submission (:mod:`~autograder.sandbox.confine`: the levels of :mod:`~autograder.sandbox.levels`, the built
view of :mod:`~autograder.sandbox.view`, the allow-list of :mod:`~autograder.sandbox.syscalls`, a uid of its own
from :mod:`~autograder.sandbox.uids`); :mod:`~autograder.sandbox.phases` decides which kinds of student process
may be alive together, machine-wide.  The folder imports of the grader only its settings and message tables
(``autograder.settings``, ``autograder.engine.strings``, ``judge_words``), so the engine above it judges and this
folder only runs: docs/security.md says what each level guarantees.
"""
