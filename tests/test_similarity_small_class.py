"""The similarity report on small classes (5 to 10 students): independent students are not flagged, copies are.

``tests/fixtures/independent`` holds ten correct submissions (90/90 each: the slow test below grades them) written
independently from the handout alone, in different styles (two fill in the skeleton, eight start afresh).  Every
class of 2 to 10 of them was measured (``benchmarks/similarity_small_classes.py``, docs/batch.md); these tests
keep the worst of those classes: a class of nine with two copies of one student as a TA runs it, the classes with the
highest independent scores, and a class of five whose two copies once lifted the class's own fence above the disguised
copy's score.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.batch import inputs, similarity
from code_transforms import disguise, recomment, rename_identifiers
from conftest import grade, load_results

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "independent"
NAMES = sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())
CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")
#: a class of nine, and the student copied in it: chidi's highest independent score is with gus (0.50 in the class)
NINE, COPIED = NAMES[:9], "chidi"
#: the measured classes with the highest independent scores (among students, and with solutions/)
WORST = (("alice", "chidi", "dana", "gus", "jun"), ("alice", "bao", "emeka", "gus", "jun"),
         ("chidi", "dana", "farah", "gus", "hana", "ines", "jun"),
         ("alice", "bao", "emeka", "farah", "gus", "ines", "jun"))


def _copy(source: Path, target: Path, transform=None) -> None:
    target.mkdir(parents=True)
    for file in CONTRACT:
        text = (source / file).read_text()
        (target / file).write_text(transform(text) if transform else text)


def _flagged(data: dict) -> set[frozenset[str]]:
    return {frozenset(member for side in (pair["a"], pair["b"]) for member in side["members"] or [side["key"]])
            for pair in data["pairs"] if pair["flagged"]}


def test_a_class_of_nine_flags_the_copies_and_no_independent_student(tmp_path: Path) -> None:
    """Nine independent students, one of them copied twice (exactly, and with every identifier renamed and the
    comments changed), compared as a batch run compares them (with solutions/ and torch's scaler)."""
    klass = tmp_path / "class"
    for name in NINE:
        _copy(FIXTURES / name, klass / name)
    _copy(FIXTURES / COPIED, klass / "copied_exact")
    _copy(FIXTURES / COPIED, klass / "copied_renamed", lambda text: recomment(rename_identifiers(text)))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "autograder", "similarity", *sorted(map(str, klass.iterdir())),
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads((out / similarity.JSON_NAME).read_text())
    flagged = _flagged(data)
    assert frozenset({COPIED, "copied_renamed"}) in flagged or frozenset({COPIED, "copied_exact", "copied_renamed"}) \
        in flagged, flagged
    (cluster,) = data["clusters"]
    assert sorted(cluster["keys"]) == [COPIED, "copied_exact"]
    assert not data["sources"], data["sources"]  # nobody matches solutions/ or torch's scaler
    for first, second in itertools.combinations(NINE, 2):
        assert not any({first, second} <= pair for pair in flagged), (first, second, data["threshold"])
    assert all(pair & {COPIED, "copied_exact", "copied_renamed"} for pair in flagged), flagged


@pytest.mark.parametrize("members", [*itertools.combinations(NAMES, 9), *WORST],
                         ids=lambda members: f"{len(members)}-without-{'-'.join(sorted(set(NAMES) - set(members)))}")
def test_no_independent_student_is_flagged_in_a_measured_small_class(members: tuple[str, ...], tmp_path: Path) -> None:
    found = inputs.discover([FIXTURES / name for name in members], tmp_path / "in").submissions
    report = similarity.analyse(found, solution=similarity.REFERENCE_SOLUTION,
                                torch_scaler=similarity.torch_scaler_source())
    assert report.threshold == similarity.THRESHOLD_FLOOR
    assert not report.flagged, [(pair.title, pair.score) for pair in report.flagged]


def test_copies_in_a_class_of_five_do_not_lift_the_threshold_above_a_disguised_copy(tmp_path: Path) -> None:
    """With its class-derived fence, this class of five with two copies of chidi (seven submissions) had a threshold
    of 0.95, above the disguised copy's 0.94: the copy went unflagged."""
    members = ("chidi", "dana", "emeka", "gus", "ines")
    for name in members:
        _copy(FIXTURES / name, tmp_path / "class" / name)
    _copy(FIXTURES / "chidi", tmp_path / "class" / "chidi_exact")
    _copy(FIXTURES / "chidi", tmp_path / "class" / "chidi_disguised", disguise)
    found = inputs.discover(sorted((tmp_path / "class").iterdir()), tmp_path / "in").submissions
    report = similarity.analyse(found, solution=None, torch_scaler=similarity.torch_scaler_source())
    scores = {frozenset((pair.a.key, pair.b.key)): pair.score for pair in report.pairs}
    assert scores[frozenset(("chidi", "chidi_disguised"))] < similarity.THRESHOLD_CEILING
    flagged = {frozenset((pair.a.key, pair.b.key)) for pair in report.flagged}
    assert frozenset(("chidi", "chidi_disguised")) in flagged or frozenset(("chidi_exact", "chidi_disguised")) \
        in flagged, flagged
    assert [sorted(member.key for member in cluster.members) for cluster in report.clusters] == [["chidi",
                                                                                                  "chidi_exact"]]
    assert all(pair & {"chidi", "chidi_exact", "chidi_disguised"} for pair in flagged), flagged


def test_every_independent_fixture_is_correct(tmp_path: Path) -> None:
    """Each fixture earns every CPU point: a submission that is not correct has no place among them."""
    done = grade([FIXTURES], tmp_path / "out")
    assert done.returncode == 0, done.stderr[-3000:]
    scores = {name: load_results(tmp_path / "out", name)["score"] for name in NAMES}
    assert len(NAMES) == 10 and set(scores.values()) == {90.0}, scores
