"""The similarity report's data: fingerprints, pairs and the report that the CSV, summary and page show.

Apart from :mod:`autograder.batch.similarity` (which computes it) so that the page
(:mod:`autograder.batch.similarity_html`) renders it without importing the computation back.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

#: the files compared (answers.py is a few letters: every correct one is alike)
FILES = ("loss_scaler.py", "amp_step.py")
#: tokens (after filtering) a match must span to count; copydetect's default
NOISE = 25
#: pairs shown in similarity.html / summary.md at most
MAX_REPORTED = 50
#: pairs shown below the threshold when none reaches it (so the page shows what "normal" looks like)
CLOSEST_WHEN_NONE = 3
#: the reference solution's key among the parties (submission names never hold a "/")
SOLUTION_KEY = "solutions/"
#: torch's own scaler (torch/amp/grad_scaler.py of the installed torch), compared as a loss_scaler.py: Task 1 asks for
#: a scaler written by hand, so a copy of torch's is flagged as a copy of the reference solution is
TORCH_KEY = "torch/amp/grad_scaler.py"


@dataclass
class Fingerprint:
    """One file's winnowed fingerprints, with what copydetect's ``compare_files`` reads."""

    raw_code: str
    filtered_code: str
    offsets: np.ndarray  # copydetect: filtered index -> characters removed before it
    positions: np.ndarray  # int64, increasing: where each kept fingerprint starts (filtered code)
    values: np.ndarray  # int64, the fingerprint at each position
    token_coverage: float
    k: int = NOISE
    _index: dict[int, list[int]] | None = field(default=None, repr=False)

    @property
    def hash_idx(self) -> dict[int, list[int]]:
        if self._index is None:
            index: dict[int, list[int]] = {}
            for value, position in zip(self.values.tolist(), self.positions.tolist()):
                index.setdefault(value, []).append(position)
            self._index = index
        return self._index

    @property
    def hashes(self) -> set[int]:
        return set(self.hash_idx)


_UTILS: ModuleType | None = None


def copydetect_utils() -> ModuleType:
    """copydetect's tokenizer, winnowing and overlap functions (``copydetect.utils``), loaded without running the
    package's ``__init__``: that imports ``copydetect.detector``, and with it matplotlib.pyplot for a report page
    this package never draws (0.3 s of CPU, more than a single submission's whole comparison).  Nothing of the
    half-made package is left in ``sys.modules``: a later ``import copydetect`` gets the whole package as usual."""
    global _UTILS
    if _UTILS is None:
        if "copydetect" in sys.modules:  # already imported whole
            _UTILS = importlib.import_module("copydetect.utils")
            return _UTILS
        spec = importlib.util.find_spec("copydetect")  # finds the package without running it
        if spec is None:
            raise ModuleNotFoundError("No module named 'copydetect'", name="copydetect")
        sys.modules["copydetect"] = importlib.util.module_from_spec(spec)
        try:
            _UTILS = importlib.import_module("copydetect.utils")
        finally:
            for name in [name for name in sys.modules if name == "copydetect" or name.startswith("copydetect.")]:
                del sys.modules[name]
    return _UTILS


def copied_slices(first: Fingerprint, second: Fingerprint) -> tuple[np.ndarray, np.ndarray]:
    """Where each file holds code the other has too, in its unfiltered text: the slices of copydetect's
    ``compare_files(first, second)`` (2 x N arrays of starts and ends), from its own functions."""
    utils = copydetect_utils()
    index_first, index_second = utils.find_fingerprint_overlap(first.hashes, second.hashes, first.hash_idx,
                                                               second.hash_idx)
    slices = [utils.get_copied_slices(index_first, first.k), utils.get_copied_slices(index_second, second.k)]
    if len(slices[0][0]) == 0:
        return np.array([]), np.array([])
    for made, where in zip((first, second), slices):
        if len(made.offsets) > 0:  # filtered positions back to the unfiltered text, as compare_files does
            where += made.offsets[:, 1][np.clip(np.searchsorted(made.offsets[:, 0], where), 0,
                                                made.offsets.shape[0] - 1)]
    return slices[0], slices[1]


# --------------------------------------------------------------------------- the report


@dataclass(frozen=True)
class Party:
    """One side of a pair: a submission of this batch or of the reference set."""

    key: str  # unique: the submission name, "reference/<name>", or SOLUTION_KEY
    label: str  # what a TA reads: students' names when known, else the key
    reference: bool = False
    solution: bool = False  # a source no submission may copy: the reference solution (solutions/), torch's scaler
    members: tuple["Party", ...] = ()  # a cluster of identical submissions: every member (this one's key first)

    @property
    def source(self) -> str:
        """Which source a solution party is, as the words name it (``matches_<source>``)."""
        return "torch" if self.key == TORCH_KEY else "solution"


@dataclass
class PairFile:
    file: str
    similarity: float  # the larger of the two sides'
    similarity_a: float
    similarity_b: float
    overlap: int  # tokens covered by shared fingerprints (the larger side's count)
    #: each side's tokens covered by shared fingerprints that are not common code (the pair score's numerators)
    distinct_a: int = 0
    distinct_b: int = 0


@dataclass
class Pair:
    a: Party
    b: Party
    files: dict[str, PairFile]
    #: how much distinctive code the two share, by size (autograder.batch.similarity_score)
    score: float = 0.0

    @property
    def title(self) -> str:
        return f"{self.a.key} ~ {self.b.key}"

    @property
    def copier_and_source(self) -> tuple[Party, Party]:
        """For a pair with a source no submission may copy: the submission's side, then the source's."""
        return (self.a, self.b) if self.b.solution else (self.b, self.a)


@dataclass
class Report:
    parties: list[Party]
    pairs: list[Pair]  # every pair sharing any fingerprint, highest score first
    threshold: float
    threshold_reason: str
    prints: dict[tuple[str, str], Fingerprint]  # (party key, file) -> fingerprint
    seconds: float = 0.0
    #: submissions whose contract files are identical, two or more each (as :class:`Party` with ``members``)
    clusters: list[Party] = field(default_factory=list)
    #: the pairs a TA reads: a cluster stands for its members (no pair inside it, one pair per outsider)
    grouped: list[Pair] = field(default_factory=list)
    #: submission key -> the contract files that still hold the reference's solution markers
    markers: dict[str, list[str]] = field(default_factory=dict)
    #: whether the reference solution was compared, and if not, why ("" when it was)
    solution_note: str = ""
    #: submission key -> why it is flagged for review (names of similarity_groups.REVIEW_PATTERNS)
    review: dict[str, list[str]] = field(default_factory=dict)

    @property
    def flagged(self) -> list[Pair]:
        """The grouped pairs at or above the threshold (what similarity.html and summary.md list)."""
        return [pair for pair in self.grouped if pair.score >= self.threshold]

    @property
    def listed(self) -> list[Pair]:
        """The pairs similarity.html shows, in order (anchor ``pair-N`` for the N-th): the flagged ones up to
        :data:`MAX_REPORTED`, else the closest few for comparison."""
        flagged = self.flagged
        return flagged[:MAX_REPORTED] if flagged else self.grouped[:CLOSEST_WHEN_NONE]

    def matches_solution(self) -> list[Pair]:
        """Flagged pairs with a source no submission may copy (the reference solution, torch's scaler)."""
        return [pair for pair in self.flagged if pair.b.solution or pair.a.solution]
