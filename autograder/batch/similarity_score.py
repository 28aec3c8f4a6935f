"""How a pair of submissions is scored: how much of one side's *distinctive* code the other side holds.

A file's copydetect similarity (the share of its fingerprinted tokens that the other file shares) is what
similarity.csv and the pages show per file; it cannot rank a pair on its own.  Every correct ``amp_step.py``
is the same ten lines (about 150 tokens), so two students who wrote everything themselves score 1.00 on that
file, as high as a disguised copy of a 2,400-token scaler.  A pair's score therefore:

* **discounts common code**: a fingerprint held by at least :data:`COMMON_SHARE` of the class's works holding the
  file (and by at least :data:`COMMON_MIN` of them) is what a correct answer looks like, not evidence of copying;
  it counts on neither side.  A *work* is a submission, the reference solution (a typical correct answer), or a
  group of copies of one another (:func:`copy_groups`: exact, disguised, or of ``solutions/``), which counts once:
  seven copies do not make their own code common, and half a class handing in the reference solution makes its
  code a leak, not an idiom;
* **weighs files by their size**: a side's score is the distinctive tokens the other side shares, summed over
  the compared files, divided by its distinctive tokens summed over the same files;
* **discounts short work**: that divisor is at least :data:`MIN_TOKENS`, so a submission holding a few lines of
  its own (a draft that wrote only amp_step.py) cannot reach 1.00 by sharing them.

The pair's score is the larger of its two sides' (a copy padded with code of its own still covers all of the
original).  Measured on a class built from the catalogue (tests/test_similarity_class.py): independent correct
students 0.26-0.42 (0.19-0.32 against ``solutions/``), a draft with amp_step.py alone 0.00, the renamed copy,
the exact copies and the copy of ``solutions/`` 1.00.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterable, Sequence

import numpy as np

from autograder.batch.similarity_data import SOLUTION_KEY, Fingerprint, Party

#: a fingerprint held by at least this share of the submissions holding the file is common code
COMMON_SHARE = 0.5
#: ... and by at least this many of them (fewer independent works cannot tell an idiom from chance)
COMMON_MIN = 4
#: one side holding this much of the other's code (all of it counted) makes the two one copy
COPIED = 0.9
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


def copy_groups(parties: Sequence[Party], holders: dict[str, Sequence[Party]], overlap: dict[str, np.ndarray],
                prints: dict[tuple[str, str], Fingerprint]) -> dict[str, str]:
    """Who counts once towards what is common: party key -> its group's key, for the class's submissions and the
    reference solution (a typical correct answer; torch's scaler and earlier years' submissions are not counted).
    Two are in one group when one side holds :data:`COPIED` or more of the other's code (all of it counted, common
    or not), and so on transitively: exact copies, disguised copies and copies of ``solutions/`` count once, so that
    half a class handing in the reference solution makes its code a leak, not an idiom.

    ``holders``: file -> the parties holding it; ``overlap``: file -> :func:`~autograder.batch.similarity.all_pairs`'s
    overlap over those parties, in that order."""
    counted = [party for party in parties if not party.reference or party.key == SOLUTION_KEY]
    index = {party.key: k for k, party in enumerate(counted)}
    shared = np.zeros((len(counted), len(counted)))
    mine = np.zeros(len(counted))
    for file, held in holders.items():
        here = [k for k, party in enumerate(held) if party.key in index]
        rows = np.array([index[held[k].key] for k in here], dtype=np.int64)
        shared[np.ix_(rows, rows)] += overlap[file][np.ix_(here, here)]
        mine[rows] += [prints[(held[k].key, file)].token_coverage for k in here]
    side = shared / np.maximum(mine, MIN_TOKENS)[:, None]
    linked = np.maximum(side, side.T) >= COPIED
    root = list(range(len(counted)))

    def find(k: int) -> int:
        while root[k] != k:
            root[k] = root[root[k]]
            k = root[k]
        return k

    for a, b in zip(*np.nonzero(np.triu(linked, 1))):
        root[find(int(a))] = find(int(b))
    return {party.key: counted[find(k)].key for k, party in enumerate(counted)}


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
