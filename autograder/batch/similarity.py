"""Code similarity across submissions: which pairs look copied (copydetect's winnowing).

``python -m autograder similarity DIR --out OUT`` and, unless ``--no-similarity``, every
batch run write:

* ``OUT/similarity.csv``: one row per pair of submissions and contract file
  (``loss_scaler.py``, ``amp_step.py``) that share any fingerprint, most similar first;
* ``OUT/similarity.html``: the pairs at or above the threshold, side by side, with the
  matched regions highlighted (:mod:`autograder.batch.similarity_html`);
* a section of ``summary.md`` with the top pairs (:func:`markdown_section`).

How it works: `copydetect <https://github.com/blingenf/copydetect>`_ (MOSS-style
winnowing) tokenizes each file with pygments and replaces every identifier by ``V``/``F``/``O``
and every string by ``S`` and drops comments and whitespace, so renaming, re-commenting and
reformatting do not hide a copy; fingerprints are hashes of ``NOISE`` consecutive tokens,
so reordering whole methods does not either.  Every fingerprint of the released skeleton
(``assignment/<file>``) is removed as boilerplate first: two untouched skeletons score 0.

A file's similarity to another is copydetect's: the fraction of its fingerprinted tokens
that are covered by fingerprints the other file shares (shown per file).  A pair's score is how
much distinctive code the two share, by size, over both contract files
(:mod:`autograder.batch.similarity_score`: code half the class writes alike does not count, short
work cannot reach 1).  copydetect compares one pair
at a time (about a millisecond each: minutes for 500 submissions), so :func:`all_pairs`
computes the same numbers for all pairs at once with numpy; a test checks that both agree.
k-gram hashes are a fixed polynomial hash (Python's ``hash`` is salted per process), so the
same submissions give the same report.

Fingerprinting, pair scores, threshold and report rows form one pipeline over the same arrays, here;
the data it produces (:mod:`autograder.batch.similarity_data`) is what the page renders.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from autograder.engine.files import csv_text
from autograder.batch.inputs import Submission
from autograder.batch.similarity_data import (FILES, NOISE, SOLUTION_KEY, TORCH_KEY, Fingerprint,  # noqa: F401 - API
                                              Pair, PairFile, Party, Report, copydetect_utils)
from autograder.batch import similarity_memo, similarity_score
from autograder.batch.similarity_score import union_length  # noqa: F401 - API
from autograder.batch.similarity_outputs import (CSV_HEADER, CSV_NAME, HTML_NAME, JSON_NAME,  # noqa: F401 - API
                                                 MAX_IN_SUMMARY, NOT_ASKED, csv_rows, label_for, markdown_section,
                                                 report_json)
from autograder.batch.similarity_groups import (SOLUTION_MARKER, clusters_of, group_pairs,  # noqa: F401 - API
                                                review_reasons, solution_markers)
from autograder.engine import strings
from autograder import ROOT
from autograder.locations import REFERENCE_SOLUTION

SKELETON = ROOT / "assignment"
#: every match this long is guaranteed to be found (winnowing window = GUARANTEE - NOISE + 1)
GUARANTEE = 30
#: the default threshold is the upper outlier fence of the class's pair scores, kept in these bounds.  The floor lies
#: between what independently written correct submissions scored (0.60 at most, in classes of 2 to 13) and what a
#: copy disguised in every way scored (0.85 at least): benchmarks/similarity_small_classes.py, docs/batch.md
THRESHOLD_FLOOR, THRESHOLD_CEILING = 0.7, 0.95
#: the fewest submissions whose pair scores estimate the class's own fence; a smaller class is held to the floor (a few
#: copies among its pairs lifted the fence to the ceiling, above a disguised copy's score, in classes of 5 to 7)
FENCE_FROM = 11
#: distinct files from which fingerprinting is spread over the cores (below: a pool costs more than it saves)
PARALLEL_FROM = 200


# --------------------------------------------------------------------------- fingerprints


def kgram_hashes(text: str, k: int = NOISE) -> np.ndarray:
    """A 64-bit polynomial hash of every ``k`` consecutive characters (stable across processes)."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    count = len(codes) - k + 1
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    base = np.uint64(1099511628211)
    value = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for offset in range(k):
            value = value * base + codes[offset:offset + count]
    return value.view(np.int64)


def fingerprint(code: str, boilerplate: np.ndarray | None = None) -> Fingerprint:
    """Tokenize, filter and winnow one Python file (copydetect's steps), minus ``boilerplate``.

    Kept by content in the grader's cache folder (:mod:`.similarity_memo`): the reference solution and torch's
    scaler are lexed once, not in every batch."""
    removed = boilerplate if boilerplate is not None and len(boilerplate) else np.zeros(0, dtype=np.int64)
    try:
        name = similarity_memo.key("fingerprint", code.encode("utf-32-le"), removed.astype(np.int64).tobytes())
    except UnicodeEncodeError:  # lone surrogates: not kept
        return _fingerprint(code, boilerplate)

    def made() -> dict[str, np.ndarray]:
        found = _fingerprint(code, boilerplate)
        return {"filtered": np.frombuffer(found.filtered_code.encode("utf-32-le"), dtype=np.uint32),
                "offsets": found.offsets, "positions": found.positions, "values": found.values,
                "coverage": np.float64(found.token_coverage)}

    kept = similarity_memo.remembered(name, made)
    return Fingerprint(code, kept["filtered"].tobytes().decode("utf-32-le"), kept["offsets"], kept["positions"],
                       kept["values"], float(kept["coverage"]))


def _fingerprint(code: str, boilerplate: np.ndarray | None) -> Fingerprint:
    utils = copydetect_utils()

    filtered, offsets = utils.filter_code(code, "submission.py", "python")
    values = kgram_hashes(filtered)
    window = GUARANTEE - NOISE + 1
    if len(values):
        values, positions = utils.winnow(values, window, remove_duplicates=False)
    else:
        positions = np.zeros(0, dtype=np.int64)
    if boilerplate is not None and len(boilerplate) and len(values):
        keep = ~np.isin(values, boilerplate)
        values, positions = values[keep], positions[keep]
    order = np.argsort(positions, kind="stable")
    positions, values = positions[order].astype(np.int64), values[order]
    return Fingerprint(code, filtered, offsets, positions, values, float(union_length(positions, NOISE)))


def boilerplate_for(file: str, skeleton: Path = SKELETON) -> np.ndarray:
    """Every k-gram hash of the released skeleton's ``file`` (none when it is missing); kept as :func:`fingerprint`."""
    try:
        code = (skeleton / file).read_text(encoding="utf-8")
        name = similarity_memo.key("boilerplate", file.encode(), code.encode("utf-32-le"))
    except (OSError, UnicodeEncodeError):
        return np.zeros(0, dtype=np.int64)

    def made() -> dict[str, np.ndarray]:
        filtered, _ = copydetect_utils().filter_code(code, file, "python")
        return {"values": np.unique(kgram_hashes(filtered))}

    return similarity_memo.remembered(name, made)["values"]


# --------------------------------------------------------------------------- all pairs at once


def all_pairs(prints: Sequence[Fingerprint]) -> tuple[np.ndarray, np.ndarray]:
    """``(overlap, similarity)``, both ``n x n``: row ``a``, column ``b`` is what copydetect's
    ``compare_files(a, b)`` gives for file ``a`` (tokens of ``a`` covered by shared
    fingerprints, and that divided by ``a``'s token coverage).  The diagonal is 0."""
    n = len(prints)
    overlap = np.zeros((n, n), dtype=np.int64)
    if n < 2:
        return overlap, np.zeros((n, n))
    # fingerprints held by at least two files: only they can match
    owners = np.concatenate([np.unique(p.values) for p in prints])
    shared, counts = np.unique(owners, return_counts=True)
    shared = shared[counts >= 2]
    packed = np.zeros((n, (len(shared) + 7) // 8), dtype=np.uint8)
    local: list[tuple[np.ndarray, np.ndarray]] = []  # per file: (its shared columns, position -> column index)
    for row, p in enumerate(prints):
        slots = np.searchsorted(shared, p.values)
        slots = np.minimum(slots, max(len(shared) - 1, 0))
        held = (shared[slots] == p.values) if len(shared) else np.zeros(len(p.values), dtype=bool)
        columns = np.unique(slots[held])
        bits = np.zeros(packed.shape[1] * 8, dtype=bool)
        bits[columns] = True
        packed[row] = np.packbits(bits)
        local.append((slots, held))
    big = np.iinfo(np.int64).max // 4
    for row, p in enumerate(prints):
        slots, held = local[row]
        if not held.any():
            continue
        positions = p.positions[held]
        columns = slots[held]
        member = ((packed[:, columns >> 3] >> (7 - (columns & 7)).astype(np.uint8)) & 1).astype(bool)
        member[row] = False
        starts = np.where(member, positions[None, :], big)
        following = np.minimum.accumulate(starts[:, ::-1], axis=1)[:, ::-1]
        following = np.concatenate([following[:, 1:], np.full((n, 1), big)], axis=1)
        covered = np.where(member, np.minimum(following - positions[None, :], NOISE), 0)
        overlap[row] = covered.sum(axis=1)
    coverage = np.array([p.token_coverage for p in prints], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        similarity = np.where(coverage[:, None] > 0, overlap / coverage[:, None], 0.0)
    return overlap, similarity


# --------------------------------------------------------------------------- the report


def default_threshold(scores: Sequence[float], submissions: int) -> tuple[float, str]:
    """The upper outlier fence (Q3 + 1.5 IQR, Tukey) of the pair scores of a class of ``submissions``, within
    [floor, ceiling]; the floor below :data:`FENCE_FROM` submissions.

    Independently written solutions to the same small assignment share idioms, so the class's
    own distribution says what "normal" overlap is; a pair far above it is worth a look.
    """
    if submissions < FENCE_FROM:
        return THRESHOLD_FLOOR, strings.text("sim.floor", count=submissions, least=FENCE_FROM)
    q1, _, q3 = statistics.quantiles(scores, n=4, method="inclusive")
    fence = q3 + 1.5 * (q3 - q1)
    chosen = min(THRESHOLD_CEILING, max(THRESHOLD_FLOOR, fence))
    return round(chosen, 4), strings.text("sim.fence", count=len(scores), q3=f"{q3:.2f}", iqr=f"{q3 - q1:.2f}",
                                          fence=f"{fence:.2f}", floor=f"{THRESHOLD_FLOOR:g}",
                                          ceiling=f"{THRESHOLD_CEILING:g}")


def label_of(submission: Submission) -> str:
    names = "; ".join(s.name or s.email or s.sid for s in submission.submitters if s.name or s.email or s.sid)
    return f"{names} ({submission.name})" if names else submission.name


def read_contract_files(path: Path, scratch: Path) -> dict[str, str]:
    """Every contract file of one submission folder or zip (intake's rules: near-miss names, caps)."""
    from autograder.engine import intake

    try:
        staged = intake.stage(path, scratch)
    except intake.IntakeError:
        return {}
    try:
        return {file: (staged.folder / file).read_text(encoding="utf-8", errors="replace")
                for file in intake.WANTED if (staged.folder / file).is_file()}
    finally:
        shutil.rmtree(staged.folder, ignore_errors=True)


def _fingerprint_batch(codes: list[str], boilerplate: np.ndarray) -> list[Fingerprint]:
    return [fingerprint(code, boilerplate) for code in codes]


def fingerprint_all(codes: dict[str, str], boilerplate: np.ndarray) -> dict[str, Fingerprint]:
    """Fingerprint every code (key -> code); tokenizing dominates, so large sets use every core."""
    keys = sorted(codes)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    if len(keys) < PARALLEL_FROM or cores < 2:
        return dict(zip(keys, _fingerprint_batch([codes[k] for k in keys], boilerplate)))
    import concurrent.futures
    import multiprocessing

    parts = [keys[i::cores] for i in range(cores)]
    context = multiprocessing.get_context("forkserver")  # not fork: the batch's process may hold threads
    with concurrent.futures.ProcessPoolExecutor(cores, mp_context=context) as pool:
        done = pool.map(_fingerprint_batch, [[codes[k] for k in part] for part in parts], [boilerplate] * cores)
        return {key: made for part, prints in zip(parts, done) for key, made in zip(part, prints)}


def torch_scaler_source() -> Path | None:
    """torch's own ``grad_scaler.py`` in the torch installed beside the grader (found without importing torch)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    folders = list(spec.submodule_search_locations or ()) if spec else []
    found = [Path(folder) / "amp" / "grad_scaler.py" for folder in folders]
    return next((path for path in found if path.is_file()), None)


def analyse(submissions: Sequence[Submission], references: Sequence[Submission] = (),
            threshold: float | None = None, skeleton: Path = SKELETON, solution: Path | None = None,
            torch_scaler: Path | None = None) -> Report:
    """Compare every pair of ``submissions`` and each of them with every one of ``references``, with the
    reference ``solution`` folder (when given and present) and with ``torch_scaler`` (torch's ``grad_scaler.py``,
    as a ``loss_scaler.py``, when given); group identical submissions; find solution markers."""
    import time

    started = time.perf_counter()
    parties = [Party(s.name, label_of(s)) for s in submissions]
    parties += [Party(f"reference/{s.name}", strings.text("sim.reference_label", label=label_of(s)), True)
                for s in references]
    paths = [s.path for s in list(submissions) + list(references)]
    solution_note = NOT_ASKED
    if solution is not None:
        found = any((solution / file).is_file() for file in FILES)  # a pip install has no solutions/
        solution_note = ("" if found
                         else strings.text("sim.solution_has_none", solution=solution, files=", ".join(FILES)))
        if found:
            parties.append(Party(SOLUTION_KEY, strings.text("sim.solution_label"), True, True))
            paths.append(solution)
    texts: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="amp-similarity-") as scratch:
        for party, path in zip(parties, paths):
            texts[party.key] = read_contract_files(path, Path(scratch))
    if torch_scaler is not None:  # flagged like the reference solution: a copy of either is not the student's work
        parties.append(Party(TORCH_KEY, strings.text("sim.torch_label"), True, True))
        texts[TORCH_KEY] = {"loss_scaler.py": torch_scaler.read_text(encoding="utf-8")}
    markers = {party.key: found for party in parties if not party.reference
               and (found := solution_markers(texts[party.key]))}
    review = {party.key: found for party in parties
              if not party.reference and (found := review_reasons(texts[party.key]))}
    prints: dict[tuple[str, str], Fingerprint] = {}
    for file in FILES:
        holders = [party for party in parties if file in texts[party.key]]
        digests = {party.key: hashlib.sha256(texts[party.key][file].encode("utf-8", "surrogatepass")).hexdigest()
                   for party in holders}
        distinct = {digest: texts[key][file] for key, digest in digests.items()}  # identical files: once
        made = fingerprint_all(distinct, boilerplate_for(file, skeleton))
        for party in holders:
            prints[(party.key, file)] = made[digests[party.key]]
    found_clusters = clusters_of(parties, texts, prints)
    holders = {file: [party for party in parties if (party.key, file) in prints] for file in FILES}
    raw = {file: all_pairs([prints[(party.key, file)] for party in holders[file]]) for file in FILES}
    group = similarity_score.copy_groups(parties, holders, {file: raw[file][0] for file in FILES}, prints)
    pairs: dict[tuple[str, str], Pair] = {}
    own: dict[str, float] = {}  # party key -> its distinctive tokens over every compared file
    for file in FILES:
        held = holders[file]
        common = similarity_score.common_values((group[party.key], prints[(party.key, file)])
                                                for party in held if party.key in group)
        lean = [similarity_score.discounted(prints[(party.key, file)], common) for party in held]
        for party, made in zip(held, lean):
            own[party.key] = own.get(party.key, 0.0) + made.token_coverage
        overlap, similarity = raw[file]
        distinct_overlap, _ = all_pairs(lean)
        for i, a in enumerate(held):
            for j in range(i + 1, len(held)):
                b = held[j]
                if a.reference and b.reference:
                    continue
                shared = int(max(overlap[i, j], overlap[j, i]))
                if shared == 0:
                    continue
                entry = PairFile(file, round(float(max(similarity[i, j], similarity[j, i])), 4),
                                 round(float(similarity[i, j]), 4), round(float(similarity[j, i]), 4), shared,
                                 int(distinct_overlap[i, j]), int(distinct_overlap[j, i]))
                pairs.setdefault((a.key, b.key), Pair(a, b, {})).files[file] = entry
    for pair in pairs.values():
        entries = pair.files.values()
        pair.score = round(max(similarity_score.side_score([e.distinct_a for e in entries], [own[pair.a.key]]),
                               similarity_score.side_score([e.distinct_b for e in entries], [own[pair.b.key]])), 4)
    ordered = sorted(pairs.values(), key=lambda pair: (-pair.score, pair.a.key, pair.b.key))
    if threshold is None:
        among = [pair.score for pair in ordered if not pair.b.reference]
        count = sum(1 for party in parties if not party.reference)
        among += [0.0] * (count * (count - 1) // 2 - len(among))  # pairs sharing nothing score 0
        threshold, reason = default_threshold(among, count)
    else:
        reason = strings.text("sim.set")
    worth = [members for members in found_clusters
             if similarity_score.worth_a_cluster(own.get(members[0].key, 0.0), threshold)]
    clusters, grouped = group_pairs(ordered, worth)
    return Report(parties, ordered, threshold, reason, prints, round(time.perf_counter() - started, 3), clusters,
                  grouped, markers, solution_note, review)


# --------------------------------------------------------------------------- outputs

def write_outputs(out: Path, report: Report) -> None:
    """similarity.csv and similarity.html (atomically, only when changed)."""
    from autograder.batch import similarity_html  # copydetect's comparison, only when a page is written
    from autograder.engine.files import write_if_changed

    write_if_changed(out / CSV_NAME, csv_text(CSV_HEADER, csv_rows(report)))
    write_if_changed(out / JSON_NAME, json.dumps(report_json(report), indent=1) + "\n")
    write_if_changed(out / HTML_NAME, similarity_html.render(report))


def run_for_batch(out: Path, submissions: Sequence[Submission], references: Iterable[Submission],
                  threshold: float | None, solution: Path | None = REFERENCE_SOLUTION) -> str:
    """Batch hook: analyse (with the reference ``solution`` unless None), write the files, return the summary.md
    section."""
    report = analyse(submissions, list(references), threshold, solution=solution, torch_scaler=torch_scaler_source())
    write_outputs(out, report)
    return markdown_section(report)
