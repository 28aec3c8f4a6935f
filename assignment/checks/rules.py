"""The rules every submitted file follows, and the Quick Check answers read as text.

``loss_scaler.py`` and ``amp_step.py`` run compiled under the grader's policy
(:mod:`checks.policy`, at compile time, and :mod:`checks.guards`, at run time): every
attribute, item, import and write goes through a guard.  :func:`check_source` lists what
the policy refuses when it compiles a file; a file with refusals is not run, and every
test that needs it fails with the line and the reason (:func:`explain`).

``answers.py`` is never run at all: its answers are read as literal strings
(:func:`parse_answers`).  The public checks load files the same way, so a refused
construct shows up locally, with the line and the reason, before you submit.
"""

from __future__ import annotations

import ast

from checks.policy import Violation, refusals

#: Files that are compiled under the policy and run; ``answers.py`` is only parsed.
RUN_FILES = ("loss_scaler.py", "amp_step.py")
QUESTIONS = ("Q1", "Q2", "Q3", "Q4", "Q5")


def check_source(source: str, filename: str) -> list[Violation]:
    """Every construct the policy refuses in ``source`` (the text of ``filename``), in line order.

    A file with a syntax error has no violations here: importing it reports the error.
    """
    return refusals(source, filename)


def explain(filename: str, violations: list[Violation], limit: int = 8) -> str:
    """The student-facing message for a file that breaks the rules (it is then not run)."""
    lines = [f"  {v}" for v in violations[:limit]]
    if len(violations) > limit:
        lines.append(f"  … and {len(violations) - limit} more")
    return (f"{filename} was not run: it uses constructs the grader refuses (see \"Rules for your code\" in the "
            "handout). Every test that needs this file fails until they are removed:\n" + "\n".join(lines))


def _answer_text(value: ast.expr | None) -> str | None:
    """A literal answer as text: strings as they are, other literals as written (``2`` -> "2")."""
    if not isinstance(value, ast.Constant) or value.value is None or value.value is Ellipsis:
        return None
    return (value.value if isinstance(value.value, str) else repr(value.value))[:100]


def parse_answers(source: str | None) -> dict[str, str | None]:
    """The Quick Check answers of ``answers.py``, read as literal strings; the file is never run.

    An answer counts only as a top-level ``Qn = "letter"`` assignment of a string literal;
    anything else (a computed value, ``...``, a missing line) reads as unanswered (None),
    and the last assignment of a question wins, as it would when the file ran.
    """
    answers: dict[str, str | None] = {name: None for name in QUESTIONS}
    if source is None:
        return answers
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return answers
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        for target in targets:
            if isinstance(target, ast.Name) and target.id in answers:
                answers[target.id] = _answer_text(value)
    return answers
