"""What each catalogued mistake looks like to a student, and which mistakes no answer can tell apart.

Each bug's words, completing the sentence "This is what happens when ..." for every bug of
``tests/catalogue/catalogue.py``, are :data:`checks.words.MISTAKES` (one table per language, shipped with the
checks, which print the same line; kept out of the catalogue's entries, so the catalogue stays a table of code and
verdicts).  :func:`sentence` and :func:`described` look them up in the current language when they render.

:data:`TWINS` lists groups of bugs that answer every recorded call of some row identically: on that
row no grader can say which of them a submission made, so a match names the whole group.  The tests
check that every indistinguishable pair the table finds is listed here (a new one fails loudly).
"""

from __future__ import annotations

from typing import Sequence

from checks.judge import diagnose

#: Groups of bugs that answer some row's recorded calls identically (see the module docstring), found by
#: building the table of the whole catalogue (``python -m autograder.diagnosis build --variants all``).
TWINS: tuple[frozenset[str], ...] = (
    # on a CPU, autocast with device_type="cuda" does nothing: the forward runs in float32 either way (2.1)
    frozenset({"hardcoded_cuda", "no_autocast"}),
    # the misuse row's recorded calls (1.13) get the same answers from both
    frozenset({"state_never_cleared", "update_without_step_no_error"}),
    # both subclass torch.amp.GradScaler at import, which the stand-in refuses alike
    frozenset({"delegate_subclass", "delegate_obfuscated"}),
)


def sentence(bugs: Sequence[str]) -> str:
    """The student's line for a match with ``bugs`` (one bug, or one group of twins)."""
    return diagnose.sentence(bugs)


def described(bugs: Sequence[str]) -> str:
    """What happens when ``bugs`` are made, for a table that heads its column with "what happens when"."""
    from autograder.engine.judge_words import say  # when rendered: the grader's words are in no student process

    return say("mistake.words", words=diagnose.described(bugs))
