"""What the similarity report tells beyond pair scores: identical submissions as one cluster, and the
reference solution's markers left in a submission.

* **Clusters**: submissions whose compared files are identical (line endings and trailing spaces aside) are
  one cluster: seven verbatim copies are one finding of seven, not 21 pairs.  :func:`group_pairs` lets a
  cluster stand for its members in the pairs a TA reads (no pair inside it, one pair per outsider);
  ``similarity.csv`` keeps every pair.
* **Solution markers**: ``# BEGIN SOLUTION`` / ``# END SOLUTION`` and a line ending in ``# SOLUTION``
  (otter-grader's, which ``solutions/`` uses and ``make student`` removes) in any contract file.
"""

from __future__ import annotations

import hashlib
import re
from typing import Sequence

from autograder.batch.similarity_data import FILES, Fingerprint, Pair, Party
from autograder.engine import strings

#: the reference's solution markers (see autograder.packaging.release; a test keeps them in step)
SOLUTION_MARKER = re.compile(r"#\s*(BEGIN|END)\s+SOLUTION\b|#\s*SOLUTION\s*$", re.MULTILINE)


#: What flags a submission for review (a TA's look, never a grade), read from its source text: name -> pattern.
#: Each name's words (what it does, why it deserves a look) are the report's ``review.<name>``
#: (autograder.diagnosis.page_words).  Code that does these can reach what plain Python cannot: torch's memory
#: (docs/security.md, "Raw memory").
REVIEW_PATTERNS = {
    "raw_memory": re.compile(r"__array_interface__|__array_struct__|\bfrom_blob\b|\bfrom_address\b|\bctypes\b"
                             r"|\bcffi\b"),
    "code_objects": re.compile(r"\bCodeType\b|\bco_code\s*=|\.__code__\s*=(?!=)|\bmarshal\s*\.\s*loads?\b"),
    "process_memory": re.compile(r"/proc/[^\s'\"]*/(?:maps|smaps|mem|pagemap)\b"),
}


def review_reasons(files: dict[str, str]) -> list[str]:
    """The names of :data:`REVIEW_PATTERNS` that some file of ``files`` (name -> text) matches."""
    return [name for name, pattern in REVIEW_PATTERNS.items() if any(pattern.search(text) for text in files.values())]


def solution_markers(files: dict[str, str]) -> list[str]:
    """The files (of ``files``: name -> text) that hold the reference's solution markers, which the released
    skeleton never has: a sign the file came from the reference solution."""
    return sorted(name for name, text in files.items() if SOLUTION_MARKER.search(text))


def clusters_of(parties: Sequence[Party], texts: dict[str, dict[str, str]],
                prints: dict[tuple[str, str], Fingerprint]) -> list[list[Party]]:
    """Submissions whose compared files are identical (every file in :data:`FILES`, byte for byte, line endings
    and trailing spaces aside), two or more each; untouched skeletons (no code of their own) are not grouped."""
    groups: dict[tuple[str, ...], list[Party]] = {}
    for party in parties:
        held = [file for file in FILES if file in texts[party.key]]
        if party.reference or not held or all(prints[(party.key, f)].token_coverage == 0 for f in held):
            continue
        key = tuple(hashlib.sha256(_normalised(texts[party.key].get(f)).encode("utf-8", "surrogatepass")).hexdigest()
                    for f in FILES)
        groups.setdefault(key, []).append(party)
    return [members for members in groups.values() if len(members) > 1]


def _normalised(text: str | None) -> str:
    if text is None:
        return "\0absent"
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").splitlines()).strip("\n")


def cluster_party(members: Sequence[Party]) -> Party:
    """One party standing for identical submissions (its key is the first member's)."""
    labels = ", ".join(member.label for member in members)
    return Party(members[0].key, strings.text("sim.cluster_label", count=len(members), labels=labels),
                 members=tuple(members))


def group_pairs(pairs: Sequence[Pair], clusters: Sequence[Sequence[Party]]) -> tuple[list[Party], list[Pair]]:
    """The cluster parties, and ``pairs`` with each cluster as one side: no pair inside a cluster, and one pair
    (the highest) between a cluster and anyone else."""
    stands_for: dict[str, Party] = {}
    parties = []
    for members in clusters:
        party = cluster_party(members)
        parties.append(party)
        stands_for.update({member.key: party for member in members})
    grouped: dict[tuple[str, str], Pair] = {}
    for pair in pairs:  # highest score first: the first pair of two sides is kept
        a, b = stands_for.get(pair.a.key, pair.a), stands_for.get(pair.b.key, pair.b)
        if a.key == b.key or (a.key, b.key) in grouped or (b.key, a.key) in grouped:
            continue
        grouped[(a.key, b.key)] = pair if (a, b) == (pair.a, pair.b) else Pair(a, b, pair.files, pair.score)
    return parties, list(grouped.values())
