"""The batch ledger: what has been graded, in a SQLite file inside the output folder.

One row per submission name, written in **one transaction per finished submission**
(WAL journal, ``synchronous=FULL``): a run killed at any moment (Ctrl-C, ``kill -9``,
power loss) leaves every finished submission recorded exactly once and nothing half
recorded.  Every other output file (results.json, feedback, gradebook, summary) is
rendered from the ledger, so a resumed run can always rebuild them.

A row is reused by a later run only when the submission's content hash and the
grader's fingerprint (tests, rubric, limits) are unchanged.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

SCHEMA = """
CREATE TABLE IF NOT EXISTS graded (
    name        TEXT PRIMARY KEY,
    digest      TEXT NOT NULL,
    grader      TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('graded', 'errored')),
    score       REAL NOT NULL,
    max_score   REAL NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    results     TEXT NOT NULL,
    staff_log   TEXT NOT NULL DEFAULT '',
    source      TEXT NOT NULL DEFAULT '',
    seconds     REAL NOT NULL DEFAULT 0,
    attempts    INTEGER NOT NULL DEFAULT 1
);
-- verdicts replaced by a later grading of the same name (regrade impact: autograder.batch.regrade)
CREATE TABLE IF NOT EXISTS replaced (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    grader      TEXT NOT NULL,
    status      TEXT NOT NULL,
    score       REAL NOT NULL,
    max_score   REAL NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    results     TEXT NOT NULL
);
"""


@dataclass
class Entry:
    """One finished submission."""

    name: str
    digest: str
    grader: str
    status: str  # "graded" (it has a score) or "errored" (it could not be graded; see reason)
    score: float
    max_score: float
    results: dict[str, Any]
    reason: str = ""
    staff_log: str = ""
    source: str = ""
    seconds: float = 0.0
    attempts: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


class Ledger:
    """The SQLite ledger at ``path`` (created if missing).  Only one process writes it."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not path.exists()
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, timeout=60)
        if fresh:
            os.chmod(path, 0o600)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record(self, entry: Entry) -> None:
        """Record one finished submission atomically; the row it replaces is kept in ``replaced``."""
        row = (entry.name, entry.digest, entry.grader, entry.status, float(entry.score), float(entry.max_score),
               entry.reason, json.dumps(entry.results, sort_keys=False, allow_nan=False), entry.staff_log,
               entry.source, float(entry.seconds), int(entry.attempts))
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("INSERT INTO replaced (name, digest, grader, status, score, max_score, reason, results) "
                            "SELECT name, digest, grader, status, score, max_score, reason, results FROM graded "
                            "WHERE name = ?", (entry.name,))
            self.db.execute("INSERT OR REPLACE INTO graded (name, digest, grader, status, score, max_score, reason, "
                            "results, staff_log, source, seconds, attempts) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", row)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def get(self, name: str) -> Entry | None:
        found = self.db.execute("SELECT * FROM graded WHERE name = ?", (name,)).fetchone()
        return self._entry(found) if found else None

    def keys(self) -> dict[str, tuple[str, str]]:
        """name -> (content digest, grader fingerprint) of every recorded submission."""
        return {name: (digest, grader) for name, digest, grader in
                self.db.execute("SELECT name, digest, grader FROM graded")}

    def entries(self) -> Iterator[Entry]:
        for found in self.db.execute("SELECT * FROM graded ORDER BY name"):
            yield self._entry(found)

    def replaced(self, name: str) -> Iterator[Entry]:
        """The verdicts of ``name`` that later gradings replaced, newest first."""
        for name_, digest, grader, status, score, max_score, reason, results in self.db.execute(
                "SELECT name, digest, grader, status, score, max_score, reason, results FROM replaced "
                "WHERE name = ? ORDER BY seq DESC", (name,)):
            yield Entry(name_, digest, grader, status, score, max_score, json.loads(results), reason)

    def __len__(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM graded").fetchone()[0])

    @staticmethod
    def _entry(row: tuple[Any, ...]) -> Entry:
        name, digest, grader, status, score, max_score, reason, results, staff_log, source, seconds, attempts = row
        return Entry(name, digest, grader, status, score, max_score, json.loads(results), reason, staff_log, source,
                     seconds, attempts)
