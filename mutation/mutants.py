"""What both mutation runs share: cosmic-ray's mutants, the equivalence lists and the report.

``run.py`` (student side: mutants of solutions/, killed by the grader) and ``run_grader.py``
(judge side: mutants of the grader, killed by the project's own tests) differ only in what
kills a mutant; enumerating, filtering, matching equivalents and scoring live here once.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib.metadata
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from cosmic_ray.mutating import mutate_code
from cosmic_ray.plugins import get_operator
from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkItem, WorkResult

try:
    import tomllib  # Python >= 3.11
except ModuleNotFoundError:  # Python 3.10: the `toml` package, a dependency of cosmic-ray
    import toml as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
Span = tuple[tuple[int, int], tuple[int, int]]


@dataclass
class Mutant:
    job_id: str
    path: str  # relative to ROOT
    operator: str
    occurrence: int
    line: int
    source: str  # the whole mutated file
    diff: str
    before: str
    after: str
    verdict: str = ""  # killed, survived, equivalent, errored
    detail: str = ""  # what killed it, or why it could not be judged
    why: str = ""  # the equivalence reason

    @property
    def file(self) -> str:
        return Path(self.path).name

    @property
    def folder(self) -> str:
        """A name that changes whenever the mutated source does (resumable runs key on it)."""
        return "m" + hashlib.sha256((self.path + "\0" + self.source).encode()).hexdigest()[:12]

    def summary(self) -> dict[str, Any]:
        return {"folder": self.folder, "file": self.file, "path": self.path, "operator": self.operator,
                "occurrence": self.occurrence, "line": self.line, "diff": self.diff, "before": self.before,
                "after": self.after, "verdict": self.verdict, "detail": self.detail, "why": self.why}


@dataclass
class Enumeration:
    mutants: list[Mutant] = field(default_factory=list)
    candidates: int = 0  # outside annotations: what a sample is drawn from
    skipped: int = 0  # inside annotations that are never evaluated
    invalid: int = 0  # not valid Python (among the mutants made: all, or the sample's)

    @property
    def total(self) -> int:
        return self.candidates + self.skipped


def load_toml(path: Path) -> dict[str, Any]:
    with open(path, "rb") as handle:
        return tomllib.load(handle) if tomllib.__name__ == "tomllib" else tomllib.loads(handle.read().decode())


def annotation_spans(source: str) -> list[Span]:
    """(start, end) positions of every annotation in ``source`` (parameters, returns, AnnAssign)."""
    nodes = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.arg) and node.annotation is not None:
            nodes.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            nodes.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            nodes.append(node.annotation)
    return [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in nodes]


def in_annotation(start: tuple[int, int], end: tuple[int, int], source: str, spans: list[Span]) -> bool:
    """Whether a mutation lies inside an annotation of a module that never evaluates them."""
    if "from __future__ import annotations" not in source:
        return False
    return any(lo <= start and end <= hi for lo, hi in spans)


def changed_lines(original: str, mutated: str) -> tuple[str, str]:
    """The removed and the added lines of a mutation, each stripped and joined by newlines."""
    before, after = [], []
    for line in difflib.unified_diff(original.splitlines(), mutated.splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        (before if line.startswith("-") else after).append(line[1:].strip())
    return "\n".join(before), "\n".join(after)


def unified_diff(original: str, mutated: str, path: str) -> str:
    return "\n".join(difflib.unified_diff(original.splitlines(), mutated.splitlines(),
                                          f"a/{path}", f"b/{path}", lineterm="", n=1))


def init_session(config: Path, session: Path, paths: Iterable[str] = ()) -> None:
    """A cosmic-ray session of the mutants of ``paths``, enumerated again only when their sources or
    ``config`` changed (enumerating thousands takes cosmic-ray minutes)."""
    digest = hashlib.sha256(config.read_bytes())
    for path in sorted(paths):
        digest.update(path.encode() + b"\0" + (ROOT / path).read_bytes())
    stamp = session.with_suffix(".digest")
    if paths and session.exists() and stamp.exists() and stamp.read_text() == digest.hexdigest():
        return
    session.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "cosmic_ray.cli", "init", str(config), str(session)],
                   cwd=ROOT, check=True)
    stamp.write_text(digest.hexdigest())


def enumerate_mutants(session: Path, paths: Iterable[str],
                      pick: Callable[[list[WorkItem]], list[WorkItem]] = list) -> Enumeration:
    """The mutants of ``paths`` in the session, in file and position order, that ``pick`` keeps of the
    ones outside annotations (those are recorded as skipped); the ones that are not Python are
    recorded as incompetent and left out.  Only picked mutants are made: making one parses its file."""
    sources = {p: (ROOT / p).read_text(encoding="utf-8") for p in paths}
    spans = {p: annotation_spans(s) for p, s in sources.items()}
    found = Enumeration()
    with use_db(str(session), WorkDB.Mode.open) as db:
        items = sorted(db.work_items, key=lambda w: (str(w.mutations[0].module_path), w.mutations[0].start_pos,
                                                     w.mutations[0].operator_name, w.mutations[0].occurrence))
        candidates = []
        for item in items:
            (spec,) = item.mutations
            path = str(spec.module_path)
            if in_annotation(tuple(spec.start_pos), tuple(spec.end_pos), sources[path], spans[path]):
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                      output="annotation: never evaluated (equivalent)"))
                found.skipped += 1
            else:
                candidates.append(item)
        found.candidates = len(candidates)
        for item in pick(candidates):
            (spec,) = item.mutations
            path = str(spec.module_path)
            source = sources[path]
            mutated = mutate_code(source, get_operator(spec.operator_name)(), spec.occurrence)
            if mutated is None:
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.NO_TEST))
                continue
            try:  # parso sees the bare `*` of keyword-only parameters as an operator
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", SyntaxWarning)  # `0.0 is x`: valid, and judged
                    compile(mutated, path, "exec")
            except SyntaxError as exc:
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.NORMAL,
                                                      test_outcome=TestOutcome.INCOMPETENT,
                                                      output=f"not Python: {exc}"))
                found.invalid += 1
                continue
            before, after = changed_lines(source, mutated)
            found.mutants.append(Mutant(item.job_id, path, spec.operator_name, spec.occurrence, spec.start_pos[0],
                                        mutated, unified_diff(source, mutated, path), before, after))
    return found


def even_spread(mutants: list[Mutant], limit: int | None) -> list[Mutant]:
    """A deterministic sample of ``limit`` mutants spread evenly over the ordered list."""
    if limit is None or limit >= len(mutants):
        return mutants
    step = len(mutants) / limit
    return [mutants[int(i * step)] for i in range(limit)]


def matching_entry(entries: list[dict], file: str, before: str, after: str) -> dict | None:
    # stripped on both sides: a removed decorator's "before" starts with the blank line above it
    return next((e for e in entries if e["file"] == file and e["before"].strip() == before.strip()
                 and e["after"].strip() in (after.strip(), "*")), None)  # "*": any mutation of that line


def record(session: Path, mutants: list[Mutant], equivalents: list[dict]) -> list[dict]:
    """Write each verdict into the cosmic-ray session and mark listed survivors equivalent.

    ``killed`` and ``survived`` come from the caller; ``errored`` means it could not be judged.
    Returns the equivalence entries that matched no survivor (stale, or outside a sample)."""
    used: set[int] = set()
    outcome = {"killed": TestOutcome.KILLED, "survived": TestOutcome.SURVIVED, "errored": TestOutcome.INCOMPETENT}
    with use_db(str(session), WorkDB.Mode.open) as db:
        for m in mutants:
            db.set_result(m.job_id, WorkResult(worker_outcome=WorkerOutcome.NORMAL, diff=m.diff,
                                               test_outcome=outcome[m.verdict], output=m.detail or "-"))
            if m.verdict != "survived":
                continue
            entry = matching_entry(equivalents, m.file, m.before, m.after)
            if entry is not None:
                used.add(id(entry))
                m.verdict, m.why = "equivalent", entry["why"]
    return [e for e in equivalents if id(e) not in used]


def report(mutants: list[Mutant], found: Enumeration, equivalent_list: str, stale: list[dict],
           sampled: bool, seconds: float, details: str) -> float:
    """Print every survivor and the score; returns the score (% of non-equivalent mutants killed)."""
    groups = {v: [m for m in mutants if m.verdict == v] for v in ("killed", "equivalent", "survived", "errored")}
    for verdict, title in (("equivalent", f"EQUIVALENT (listed in {equivalent_list})"),
                           ("survived", "TEST GAP (survived, not listed as equivalent)"),
                           ("errored", "ERRORED (could not be judged; rerun)")):
        if groups[verdict]:
            print(f"\n=== {title}: {len(groups[verdict])}")
        for m in groups[verdict]:
            print(f"\n--- {m.folder}  {m.operator} #{m.occurrence}  ({m.path}:{m.line})")
            print(m.diff)
            if m.why:
                print("why equivalent:", m.why)
            elif m.detail and verdict == "errored":
                print("error:", m.detail)
    if stale and not sampled:
        print(f"\nnote: {len(stale)} entries of {equivalent_list} matched no surviving mutant:")
        for e in stale:
            print(f'  {e["file"]}: {e["before"]!r} -> {e["after"]!r}')
    killed, survived, equivalent = (len(groups[v]) for v in ("killed", "survived", "equivalent"))
    judged = killed + survived
    score = 100.0 * killed / judged if judged else 100.0
    raw = 100.0 * killed / (judged + equivalent) if judged + equivalent else 100.0
    print(f"\ncosmic-ray {importlib.metadata.version('cosmic-ray')}: {found.total} mutants, "
          f"{found.skipped} skipped (annotations), {found.invalid} not valid Python, {len(mutants)} judged"
          f"{f' (a sample of the {found.candidates} outside annotations)' if sampled else ''}: "
          f"{killed} killed, {equivalent} equivalent, "
          f"{survived} survived (test gaps), {len(groups['errored'])} errored")
    print(f"mutation score: {score:.1f}% of non-equivalent mutants killed "
          f"({raw:.1f}% counting equivalents as survivors); {seconds:.0f} s.  Details: {details}")
    return score
