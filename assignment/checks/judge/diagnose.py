"""Name the mistake: compare a failing test's answers with catalogued mistakes (standard library only).

Shared by the grader (``autograder/diagnosis``, which builds the tables and annotates results.json)
and the public checks (:mod:`checks.plugin`, which prints the same line when a check fails locally).

A *table* holds, per test case, a digest of the reference's answers to that case's recorded calls and
the digest of every catalogued mistake that answers differently.  A test (one rubric row) is diagnosed
as mistake ``B`` only when the test failed, ``B`` is known to fail that test and answers at least one
of its cases differently from the reference, the answers on **every** case of the test are exactly
``B``'s (every call answered), and no other mistake fits as well unless all that fit are listed as
twins (indistinguishable by any answer): then the line names the group.  Anything less gives no line:
a wrong diagnosis is worse than none.

The grader's table holds digests only (no inputs, no answers).  The students' table
(``checks/diagnosis.json``, built by ``make student`` with ``python -m autograder.diagnosis build --public``
and committed with the handout) covers every public check, a hidden row's public example included, with its public
calls only (their inputs, so the checks can replay them; their digests are over those calls).  A public check that
fails locally the way a catalogued mistake does names it as the grader names it on that row.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from checks.words import mistake, say

#: Format version.  The optional ``source`` field (a fingerprint of the files the digests depend on) came later
#: without a bump: older readers ignore it and older tables load with ``source=None``.
VERSION = 2
#: A case where some call got no answer (the file did not import or broke the rules, a hang or crash
#: stopped the calls): not a behaviour, so it matches nothing (a syntax error is no catalogued mistake).
UNANSWERED = "unanswered"
#: The students' table: beside this file, or where ``$AMP_STUDENT_DIAGNOSIS`` says.
STUDENT_TABLE = Path(os.environ.get("AMP_STUDENT_DIAGNOSIS", Path(__file__).resolve().parents[1] / "diagnosis.json"))
#: How the English line starts (the line in the current language: :func:`sentence`).
LINE_START = "Likely mistake: this is what happens when "
#: The junit XML ``<property>`` of a failed check that carries the line (read by the notebook's ``grader.check``,
#: ``amp_otter_bridge.py``, which imports nothing from checks/ and so spells the name itself).
JUNIT_PROPERTY = "likely_mistake"


def digest(calls: Sequence[Sequence[Any]], answers: Sequence[str | None]) -> str:
    """One case's answers bound to the calls (scenario, args, timeout) they answer: a short hex digest."""
    text = json.dumps([[list(call) for call in calls], list(answers)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def canonical(value: Any) -> str:
    """The text answers are compared by (the grader's :func:`autograder.sandbox.runner.canonical`)."""
    return json.dumps(value, sort_keys=True, allow_nan=True)


@dataclass
class CaseDigests:
    test: str
    reference: str
    bugs: dict[str, str] = field(default_factory=dict)  # bug -> digest, only where it differs from the reference
    calls: list[list[Any]] | None = None  # [scenario, args, timeout]: only in the students' table


@dataclass
class Table:
    """Case name -> digests; each bug's failing tests; twin groups.  No words: a line is worded when it is rendered
    (:func:`described`), so rewording a mistake rebuilds no table."""

    cases: dict[str, CaseDigests]
    rows: dict[str, list[str]]  # bug -> test functions it is known to fail
    twins: list[list[str]] = field(default_factory=list)
    public_only: bool = False
    source: str | None = None  # fingerprint of the code it was built from (autograder.diagnosis.table.source_fingerprint)

    def to_json(self) -> str:
        return json.dumps({"version": VERSION, "public_only": self.public_only, "rows": self.rows,
                           "twins": self.twins, "source": self.source,
                           "cases": {name: c.__dict__ for name, c in self.cases.items()}},
                          sort_keys=True, indent=1) + "\n"  # one value per line: a rebuild's diff can be reviewed

    @classmethod
    def from_json(cls, text: str) -> "Table":
        data = json.loads(text)
        if data.get("version") != VERSION:
            raise ValueError(f"diagnosis table version {data.get('version')!r}, expected {VERSION}")
        # a table built before the words left it has a "words" field: ignored (the catalogue's words are read)
        return cls({name: CaseDigests(**c) for name, c in data["cases"].items()},
                   {bug: list(rows) for bug, rows in data["rows"].items()},
                   [list(group) for group in data.get("twins", [])], bool(data.get("public_only")),
                   data.get("source"))

    def twins_of(self, bug: str) -> frozenset[str]:
        """``bug`` and every bug listed as indistinguishable from it."""
        group = {bug}
        for twins in self.twins:
            if bug in twins:
                group |= set(twins)
        return frozenset(group)

    def sentence(self, bugs: Sequence[str]) -> str:
        return sentence(bugs)


def sentence(bugs: Sequence[str]) -> str:
    """The feedback line for a match with ``bugs`` (one bug, or one group of twins), in the current language."""
    return say("mistake.line", words=described(bugs))


def described(bugs: Sequence[str]) -> str:
    """What ``bugs`` do, in the current language: each bug's words, looked up now (:data:`checks.words.MISTAKES`)."""
    return say("mistake.or").join(mistake(bug) for bug in sorted(bugs))


def match_test(table: Table, test: str, mine: Mapping[str, str]) -> tuple[str, ...]:
    """The bugs whose answers equal ``mine`` (case name -> digest) on every case of ``test``; () unless unambiguous."""
    names = [name for name, case in table.cases.items() if case.test == test]
    if not names or set(names) != set(mine) or UNANSWERED in mine.values():
        return ()  # every case of the test, and only those, each fully answered
    cases = [table.cases[name] for name in names]
    suspects = [bug for bug, tests in table.rows.items() if test in tests and any(bug in c.bugs for c in cases)]
    matches = [bug for bug in suspects if all(c.bugs.get(bug, c.reference) == mine[n] for n, c in zip(names, cases))]
    if not matches:
        return ()
    group = table.twins_of(matches[0])
    return tuple(sorted(matches)) if all(bug in group for bug in matches) else ()


def answer(run: Callable[[str, dict[str, Any]], Any], scenario: str, args: dict[str, Any]) -> str:
    """The canonical answer to one call, as the grader's student process gives it.

    ``run`` raises :class:`checks.runners.harness.SubmissionFault` with the student-facing text, or whatever the
    submission's code raised.
    """
    from checks.runners import harness

    try:
        harness.seed_cpu(0)
        return canonical({"ok": json.loads(json.dumps(run(scenario, json.loads(json.dumps(args)))))})
    except harness.SubmissionFault as exc:
        return canonical({"fault": str(exc)})
    except Exception as exc:  # noqa: BLE001 - the submission's own exception is its answer
        return canonical({"fault": harness.stopped(exc)})


def explain_local_failure(test: str, run: Callable[[str, dict[str, Any]], Any],
                          path: Path = STUDENT_TABLE) -> str | None:
    """The diagnosis line for a public check ``test`` that failed locally, or None.

    Replays the test's recorded public calls through ``run`` (the local runner).  Never raises: a
    missing or damaged table, or code that misbehaves on replay, only costs the line.
    """
    try:
        table = Table.from_json(path.read_text(encoding="utf-8"))
        mine = {name: digest(case.calls or [], [answer(run, c[0], c[1]) for c in case.calls or []])
                for name, case in table.cases.items() if case.test == test and case.calls}
        bugs = match_test(table, test, mine)
    except Exception:  # noqa: BLE001 - the diagnosis is a hint; the check's own failure is what counts
        return None
    return table.sentence(bugs) if bugs else None
