"""Record ``checks/amp_effects.json``: the grader's Task-2 verdicts for the public scenarios, as data.

The students' public checks judge ``amp_step`` without a reference ``amp_step`` (which would hand
them Task 2): :mod:`checks.judge.recorded` reads what this module records from the grader's
judge (:mod:`autograder.engine.amp_reference`).  ``make student`` writes it (``release.py``);
``tests/test_amp_effects.py`` fails when the committed file is stale.

The scenarios are the public checks' own: each public Task-2 test runs here against a stand-in
student that answers with a correct ``amp_step``'s effects, and the judge installed meanwhile notes
every (row, scenario) it is asked about.  For each, the programs recorded are a correct one and
every one with a single behaviour wrong (:data:`autograder.engine.amp_reference.ROW_BREAKS`, and the
ways of :data:`COMMON` that are one mistake in a student's eyes), each with the row's own behaviour
set right: whether it passes the row or is masked is the grader's judge's decision.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
from pathlib import Path
from typing import Any, Iterator

from autograder.engine import amp_reference as ref
from checks import test_public_amp_step, words
from checks.judge import recorded
from checks.judge.effects import Verdict

_R = dataclasses.replace
#: Single mistakes that are more than one switch of the reference's configuration.
COMMON = (_R(ref.CORRECT, clipping="unscale_always", step="direct"),  # unscale_, then optimizer.step()
          _R(ref.CORRECT, clipping="unscale_always"), _R(ref.CORRECT, update="after_clean_step"))


class _Stop(Exception):
    """Ends a public test once its scenario was noted (the underflow test judges no effects)."""


class _StandIn:
    """A student whose amp_step is a correct one: the public tests' scenarios, never a submission."""

    def run(self, scenario: str, args: dict[str, Any], *, timeout: float | None = None) -> Any:
        if scenario != "amp_probe":
            raise _Stop(scenario)
        return ref.replay(json.loads(json.dumps(args)), ref.CORRECT)


def _cases(function: Any) -> Iterator[dict[str, Any]]:
    """The keyword arguments pytest calls ``function`` with (its parametrize marks), ``student`` aside."""
    marks = [mark for mark in getattr(function, "pytestmark", []) if mark.name == "parametrize"]
    if not marks:
        yield {}
        return
    names, values = marks[0].args[0], marks[0].args[1]
    names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    for value in values:
        yield dict(zip(names, value if len(names) > 1 else [value]))


def public_scenarios() -> list[tuple[str, dict[str, Any]]]:
    """Every (row, scenario) the public Task-2 checks judge, in the order they run."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def note(row: str, args: dict[str, Any], result: dict[str, Any]) -> Verdict:
        seen.append((row, json.loads(json.dumps(args))))
        return Verdict([])

    with recorded.installed(note):
        for name, function in inspect.getmembers(test_public_amp_step, inspect.isfunction):
            if name.startswith("test_"):
                for kwargs in _cases(function):
                    try:
                        function(student=_StandIn(), **kwargs)
                    except _Stop:
                        pass
    return list({recorded.case_key(row, args): (row, args) for row, args in seen}.values())


def _programs() -> list[ref.Config]:
    singles = [ref.CORRECT, *COMMON]
    for breaks in ref.ROW_BREAKS.values():
        singles += breaks(ref.CORRECT)
    return list(dict.fromkeys(singles))


def _in_every_language(render: Any) -> dict[str, Any]:
    before = os.environ.get(words.ENV)
    try:
        said = {}
        for language in words.LANGUAGES:
            os.environ[words.ENV] = language
            said[language] = render()
        return said
    finally:
        if before is None:
            os.environ.pop(words.ENV, None)
        else:
            os.environ[words.ENV] = before


def record() -> dict[str, Any]:
    """The file's data (:func:`checks.judge.recorded.encode`)."""
    effects: list[list[dict[str, Any]]] = []
    index: dict[str, int] = {}

    def stored(steps: list[dict[str, Any]]) -> int:
        """The index of ``steps`` among the effects recorded (the same effects are stored once)."""
        key = json.dumps(steps, sort_keys=True)
        if key not in index:
            index[key] = len(effects)
            effects.append(steps)
        return index[key]

    cases: dict[str, dict[str, Any]] = {}
    for row, args in public_scenarios():
        case: dict[str, Any] = {"correct": stored(ref.replay(args, ref.CORRECT)["steps"]), "accepted": [], "masked": []}
        for config in dict.fromkeys(ref.ROW_FIXES[row](program) for program in _programs()):
            result = ref.replay(args, config)
            verdict = _in_every_language(lambda: ref.judge(row, args, result))
            if not verdict[words.DEFAULT]:
                case["accepted"].append(stored(result["steps"]))
            elif verdict[words.DEFAULT].masked_by is not None:
                case["masked"].append([stored(result["steps"]), {k: v.lines for k, v in verdict.items()},
                                       {k: v.masked_by for k, v in verdict.items()}])
            # else: the grader fails this program on its own effects (it left none to tell it by): not recorded
        case["accepted"] = sorted(set(case["accepted"]))
        cases[recorded.case_key(row, args)] = case
    return recorded.encode(cases, effects)


def source_files() -> list[Path]:
    """What the recording runs: the public checks (scenarios, judge, words, runners), the grader's reference
    ``amp_step``, the grader's words (a configuration in words is recorded in every language) and this module."""
    from autograder import ROOT
    from autograder.engine import judge_words

    return sorted([*(ROOT / "assignment" / "checks").rglob("*.py"), Path(ref.__file__), Path(judge_words.__file__),
                   Path(__file__)])


def source_fingerprint() -> str:
    """The behaviour of :func:`source_files` (docstrings and comments aside) and torch's version (it computes the
    effects): equal fingerprints, the same file.  ``make student`` records again only when it differs."""
    import torch

    from autograder import ROOT
    from autograder.engine import fingerprint

    files = source_files()
    return fingerprint.behaviour_digest(files, {"paths": [p.resolve().relative_to(ROOT.resolve()).as_posix() for p in files],
                                                "torch": torch.__version__})


def is_current(path: Path) -> bool:
    """Whether the file at ``path`` was recorded by code that behaves as this checkout's does."""
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("source") == source_fingerprint()
    except (OSError, ValueError, AttributeError):
        return False


def write(path: Path) -> None:
    """Record the file (its ``source``: :func:`source_fingerprint`, which the checks' reader ignores)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {**record(), "source": source_fingerprint()}
    path.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.packaging.amp_effects", description=__doc__)
    parser.add_argument("--out", type=Path, default=recorded.RECORDED)
    write(parser.parse_args(argv).out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
