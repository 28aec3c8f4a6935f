"""The Quick Check answers, read as text: ``answers.py`` is never run.

Its answers are read as literal strings (:func:`parse_answers`), in the judge and in the
public checks alike, so no code in ``answers.py`` ever executes anywhere.
"""

from __future__ import annotations

import ast

QUESTIONS = ("Q1", "Q2", "Q3", "Q4", "Q5")


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
