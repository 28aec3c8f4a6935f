"""How a pair of submissions is scored: how much of one side's *distinctive* code the other side holds.

A file's copydetect similarity (the share of its fingerprinted tokens that the other file shares) is what
similarity.csv and the pages show per file; it cannot rank a pair on its own.  Every correct ``amp_step.py``
is the same ten lines (about 150 tokens), so two students who wrote everything themselves score 1.00 on that
file, as high as a disguised copy of a 2,400-token scaler.  A pair's score therefore:

* **discounts common code**: a fingerprint held by at least :data:`COMMON_SHARE` of the class's submissions that
  hold the file (and by at least :data:`COMMON_MIN` of them) is what a correct answer looks like, not evidence
  of copying; it counts on neither side.  Identical submissions count once (a cluster of seven copies does not
  make its own code common), and reference parties (earlier years, ``solutions/``, torch's scaler) never count,
  so a class whose amp_step.py all match ``solutions/`` does not flag the class, while a copy of the solution's
  scaler, which no independent student writes alike, still is;
* **weighs files by their size**: a side's score is the distinctive tokens the other side shares, summed over
  the compared files, divided by its distinctive tokens summed over the same files;
* **discounts short work**: that divisor is at least :data:`MIN_TOKENS`, so a submission holding a few lines of
  its own (a draft that wrote only amp_step.py) cannot reach 1.00 by sharing them.

The pair's score is the larger of its two sides' (a copy padded with code of its own still covers all of the
original).  Measured on a class built from the catalogue (tests/test_similarity_class.py): independent correct
students 0.18-0.37, a draft with amp_step.py alone 0.00, the renamed copy, the exact copies and the copy of
``solutions/`` 1.00.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterable, Sequence

import numpy as np

from autograder.batch.similarity_data import Fingerprint

#: a fingerprint held by at least this share of the submissions holding the file is common code
COMMON_SHARE = 0.5
#: ... and by at least this many of them (in a small class no code can be called common)
COMMON_MIN = 5
#: the least divisor of a side's score, in tokens: about a fifth of a correct loss_scaler.py's own code
MIN_TOKENS = 400


def union_length(positions: np.ndarray, k: int) -> int:
    """Characters covered by the windows ``[p, p + k)`` (``positions`` increasing)."""
    if len(positions) == 0:
        return 0
    return int(np.minimum(np.diff(positions), k).sum()) + k


def common_values(holders: Iterable[tuple[str, Fingerprint]]) -> np.ndarray:
    """The fingerprints held by at least :data:`COMMON_SHARE` (and :data:`COMMON_MIN`) of ``holders``: (group, print)
    of the class's submissions holding one file, a group being a submission or a cluster of identical ones."""
    by_group: dict[str, list[np.ndarray]] = {}
    for group, made in holders:
        if len(made.values):  # an untouched skeleton holds the file but none of its code
            by_group.setdefault(group, []).append(made.values)
    if not by_group:
        return np.zeros(0, dtype=np.int64)
    needed = max(COMMON_MIN, math.ceil(COMMON_SHARE * len(by_group)))
    held = [np.unique(np.concatenate(values)) for values in by_group.values()]
    values, counts = np.unique(np.concatenate(held), return_counts=True)
    return values[counts >= needed]


def discounted(made: Fingerprint, common: np.ndarray) -> Fingerprint:
    """``made`` without the ``common`` fingerprints (its token coverage counted again over what is left)."""
    if not len(common) or not len(made.values):
        return made
    keep = ~np.isin(made.values, common)
    positions = made.positions[keep]
    return replace(made, positions=positions, values=made.values[keep],
                   token_coverage=float(union_length(positions, made.k)), _index=None)


def worth_a_cluster(own: float, threshold: float) -> bool:
    """Whether identical submissions holding ``own`` distinctive tokens each are flagged as identical: when a pair
    of them would be (two drafts holding the same correct amp_step.py alone are not)."""
    return side_score([own], [own]) >= threshold


def side_score(shared: Sequence[float], own: Sequence[float]) -> float:
    """One side's score: distinctive tokens shared over its distinctive tokens (at least :data:`MIN_TOKENS`)."""
    return min(1.0, sum(shared) / max(sum(own), MIN_TOKENS))
