"""Hostile submissions: the grader survives every one and grades it truthfully.

Each submission built by :mod:`hostile` must end with a valid results.json, earn no
points it did not earn, take bounded time, not crash the grader, change nothing
outside its sandbox and leave no process behind.

The cases are graded by ``python -m autograder grade`` itself, in three runs started
side by side: the sandbox cases (``--jobs 2``), the archive/intake cases, and
``deep_folders`` alone (it can crash a whole run).  Short per-call limits come
through ``AMP_SANDBOX_LIMITS``: a hang costs ``call_seconds``, not the production 20 s.
After the runs, ``/proc`` must hold no process of the student uids their workers
were given, and the world-writable folders no file those uids own.

A zip of submissions with a corrupt member gets its own run (the grader unpacks such
zips itself).

Needs root on Linux: only then does the sandbox drop to a separate uid, which both the
isolation and these checks rely on.

Why one file of ~440 lines: the hostile runs are graded once (a module fixture) and every check
reads them.
"""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from autograder.sandbox.uids import claimed

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile  # noqa: E402
from conftest import shown, skip_unless_ci  # noqa: E402

ROOT = hostile.ROOT
# Limits are CPU time of the student's process, which the load of `make test-all` (two workers, each grading with
# --jobs 2, beside a fork bomb) does not inflate: the solution gets full marks with 1 s for every import and call,
# so 3 leaves three times that (a hang costs these seconds, not the production 20; a wait twice them).
LIMITS = {"call_seconds": 3, "import_seconds": 3, "max_call_seconds": 3}
RUN_TIMEOUT = 600
WRITABLE = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock", str(ROOT)]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def as_root_on_linux() -> None:
    """Every test here needs root on Linux: skipped elsewhere, failed in CI (which runs as root)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        skip_unless_ci("the sandbox isolates a submission (separate uid, namespaces) only as root on Linux")


class Listener:
    """TCP and UDP on one 127.0.0.1 port, plus an abstract unix socket: records whatever reaches them."""

    def __init__(self, token: str) -> None:
        self.received: list[bytes] = []
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", self.port))
        self.udp.setblocking(False)
        self.unix_name = f"{token}-unix"
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind("\0" + self.unix_name)
        self.unix.listen()
        for server in (self.tcp, self.unix):
            server.settimeout(0.5)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._serve, args=(s,), daemon=True) for s in (self.tcp, self.unix)]
        for thread in self._threads:
            thread.start()

    def _serve(self, server: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.received.append(b"connection:" + conn.recv(1024))
                except OSError:
                    self.received.append(b"connection")

    def close(self) -> list[bytes]:
        if self._stop.is_set():
            return self.received
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=2)
        try:
            while True:
                self.received.append(b"udp:" + self.udp.recv(1024))
        except OSError:
            pass
        for sock in (self.tcp, self.udp, self.unix):
            sock.close()
        return self.received


@dataclass
class Run:
    """One ``python -m autograder grade`` run over the cases of one group."""

    group: str
    cases: list[hostile.Case]
    out: Path
    jobs: int
    pid: int = 0
    returncode: int | None = None
    seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""
    uids: set[int] = field(default_factory=set)  # the student uids its workers were given


@dataclass
class Graded:
    ctx: hostile.Context
    cases: dict[str, hostile.Case]
    runs: list[Run]
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    survivors: list[str] = field(default_factory=list)
    owned_files: list[str] = field(default_factory=list)
    network: list[bytes] = field(default_factory=list)
    canary_text: str = ""
    seconds: float = 0.0


GROUPS = {"sandbox": 2, "archives": 1, "deep": 1}  # group (hostile.Case.group) -> --jobs of its run


def _ticks() -> float:
    """Now, in the clock ticks since boot that /proc/PID/stat counts start times in."""
    return float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK")


def _proc_status(pid: str) -> tuple[dict[str, str], int] | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        start = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None
    return dict(line.split(":", 1) for line in status.splitlines() if ":" in line), start


def worker_uids(cli: int) -> set[int]:
    """``--uid`` of the grading workers of the run whose main process is ``cli``."""
    uids = set()
    for entry in Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:
            continue
        mine = b"autograder.batch.worker" in args and b"--parent" in args and args[args.index(b"--parent") + 1] == b"%d" % cli
        if mine and b"--uid" in args:
            uids.add(int(args[args.index(b"--uid") + 1]))
    return uids


def processes_of(uids: set[int], started_before: float) -> list[str]:
    """Processes of ``uids`` that started before ``started_before`` (ticks): later ones belong to other runs."""
    found = []
    for entry in Path("/proc").iterdir():
        info = _proc_status(entry.name) if entry.name.isdigit() else None
        if info is None:
            continue
        fields, start = info
        if int(fields.get("Uid", "-1").split()[0]) in uids and start <= started_before:
            found.append(f"pid {entry.name} uid {fields['Uid'].split()[0]} {fields.get('Name', '').strip()} "
                         f"state {fields.get('State', '').strip()}")
    return found


def files_of(uids: set[int], since: float, until: float) -> list[str]:
    """Files owned by ``uids`` in the world-writable folders, the repository and near the top of the tree.

    Only those changed between ``since`` and ``until`` (epoch seconds): other runs held the same uids before
    (a killed worker may leave its scratch folder) and may hold them again by now.
    """
    owner = [arg for uid in sorted(uids) for arg in ("-o", "-uid", str(uid))][1:]
    show = ["-printf", "%C@ %p\n"]
    deep = subprocess.run(["find", *[d for d in WRITABLE if os.path.isdir(d)], "(", *owner, ")", *show],
                          capture_output=True, text=True).stdout.splitlines()
    top = subprocess.run(["find", "/", "-maxdepth", "3", "(", "-path", "/proc", "-o", "-path", "/sys", ")", "-prune",
                          "-o", "(", *owner, ")", *show], capture_output=True, text=True).stdout.splitlines()
    return sorted({line.split(" ", 1)[1] for line in deep + top if since <= float(line.split(" ", 1)[0]) <= until})


def grade_runs(runs: list[Run]) -> None:
    """Start every run at once; collect their workers' uids while they go."""
    env = {**os.environ, "AMP_SANDBOX_LIMITS": json.dumps(LIMITS), "PYTHONDONTWRITEBYTECODE": "1"}
    running = []
    for run in runs:
        command = [sys.executable, "-m", "autograder", "grade", *[str(c.path) for c in run.cases], "--out",
                   str(run.out), "--jobs", str(run.jobs), "--no-progress"]
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        run.pid = process.pid
        drain = [threading.Thread(target=lambda p=process, r=run: setattr(r, "stdout", p.stdout.read()), daemon=True),
                 threading.Thread(target=lambda p=process, r=run: setattr(r, "stderr", p.stderr.read()), daemon=True)]
        for thread in drain:
            thread.start()
        running.append((run, process, time.monotonic(), drain))
    deadline = time.monotonic() + RUN_TIMEOUT
    while any(process.poll() is None for _, process, _, _ in running):
        for run, process, started, _ in running:
            if process.poll() is None:
                run.uids |= worker_uids(process.pid)
                run.seconds = time.monotonic() - started
                if time.monotonic() > deadline:
                    process.kill()
        time.sleep(0.25)
    for run, process, started, drain in running:
        for thread in drain:
            thread.join(timeout=10)
        run.returncode = process.returncode  # run.uids stays empty if no worker was seen: a failure, not a guess


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    base = tmp_path_factory.mktemp("hostile")
    token = f"amp-hostile-{uuid.uuid4().hex[:10]}"
    canary = Path(f"/tmp/{token}-canary")
    canary.write_text("canary\n")
    canary.chmod(0o666)
    listener = Listener(token)
    outs = {group: base / f"out-{group}" for group in GROUPS}
    ctx = hostile.Context(out=outs["sandbox"], token=token, canary=canary, port=listener.port,
                          unix_name=listener.unix_name)
    autograder_existed = Path("/autograder").exists()
    try:
        cases = hostile.build(base / "submissions", ctx)
        runs = [Run(group, [c for c in cases if c.group == group], outs[group], jobs) for group, jobs in GROUPS.items()]
        started, started_at = time.monotonic(), time.time()
        grade_runs(runs)
        ended, ended_at = _ticks(), time.time()
        data = Graded(ctx, {c.name: c for c in cases}, runs, seconds=time.monotonic() - started)
        data.network = listener.close()
        # A uid another grader holds now (a test running beside this one) is that grader's: its processes are not
        # survivors of ours, and a daemon of ours left on it dies when that grader cleans the uid up.
        uids = {uid for uid in set().union(*(run.uids for run in runs)) if not claimed(uid)}
        deadline = time.monotonic() + 3
        while True:  # SIGKILLed processes take a moment to disappear
            data.survivors = processes_of(uids, ended)
            if not data.survivors or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        data.owned_files = files_of(uids, started_at, ended_at)
        if not autograder_existed and Path("/autograder").exists():
            data.owned_files.append("/autograder (created during grading)")
        data.canary_text = canary.read_text()
        for run in runs:
            for case in run.cases:
                for name in case.results or (case.name,):
                    path = run.out / name / "results.json"
                    if path.is_file():
                        data.results[name] = json.loads(path.read_text())
        report(data)
        yield data
    finally:
        listener.close()
        canary.unlink(missing_ok=True)
        for folder in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock"):  # what a payload left should the sandbox fail
            for leftover in Path(folder).glob(f"{token}*"):
                subprocess.run(["rm", "-rf", str(leftover)], check=False)
        hostile.remove(base / "submissions")


def report(data: Graded) -> None:
    """Seconds per run and per case on stderr (shown with -s or on failure): how long the hostile batch takes, to keep it bounded."""
    lines = [f"hostile submissions: {data.seconds:.1f} s wall for {len(data.cases)} cases"]
    for run in data.runs:
        lines.append(f"  run {run.group}: {len(run.cases)} cases, --jobs {run.jobs}, {run.seconds:.1f} s, "
                     f"exit {run.returncode}, student uids {sorted(run.uids)}")
    for case in data.cases.values():
        for name in case.results or (case.name,):
            result = data.results.get(name)
            took = (result or {}).get("execution_time")  # none where nothing was submitted: nothing ran
            seconds = f"{took:6.1f} s" if took is not None else "     - s"
            lines.append(f"  {name:28s} {seconds}  score {result.get('score', '-') if result else '-'}")
    print("\n".join(lines), file=sys.stderr)


def by_number(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {test["number"]: test for test in result["tests"] if "number" in test}


# --------------------------------------------------------------------------- per case


@pytest.mark.parametrize("name", hostile.CASE_NAMES)
def test_hostile_submission_is_graded_truthfully(graded: Graded, name: str, request: pytest.FixtureRequest) -> None:
    case = graded.cases[name]
    if case.known_hole:
        request.applymarker(pytest.mark.xfail(reason=case.known_hole, strict=True))
    run = next(run for run in graded.runs if run.group == case.group)
    assert run.returncode == 0, f"the {run.group} run crashed:\n{run.stderr[-3000:]}"
    for result_name in case.results or (case.name,):
        assert result_name in graded.results, f"no results.json for {result_name}"
        check_result(graded, case, graded.results[result_name])


def check_result(graded: Graded, case: hostile.Case, result: dict[str, Any]) -> None:
    tests = by_number(result)
    if case.nothing:  # nothing to grade: no score, no row, said so (a 0 would enter every statistic)
        assert "score" not in result and result["tests"] == [], result
        assert all(text in result["output"] for text in case.notes), result["output"]
        return
    # a well-formed Gradescope results.json, with the real rows
    assert isinstance(result["score"], (int, float)) and isinstance(result["output"], str)
    assert {item.number for item in hostile_rubric()} <= set(tests)
    for test in result["tests"]:
        assert 0 <= test["score"] <= test["max_score"], test
    assert result["score"] == pytest.approx(sum(test["score"] for test in result["tests"]), abs=1e-3)
    assert f"FAKE-{graded.ctx.token}" not in json.dumps(result)
    assert result["execution_time"] <= case.max_seconds
    assert len(json.dumps(result)) < 200_000
    # what the case must score
    if case.error:  # refused at intake: every row says why, with the refusal the case names (its notes)
        assert case.notes, f"{case.name}: an intake refusal must name its message"
        assert result["score"] == 0 and all(test["score"] == 0 for test in result["tests"])
        graded_rows = {item.number for item in hostile_rubric()}
        assert all(tests[number]["output"] == result["output"] for number in graded_rows), result["output"][:500]
    if case.score is not None:
        assert result["score"] == pytest.approx(case.score), _failed(result)
    if case.max_score is not None:
        assert result["score"] <= case.max_score + 1e-9, _failed(result)
    for number in case.full:
        assert tests[number]["score"] == tests[number]["max_score"], f"{number}: {tests[number]['output'][:500]}"
    for number in case.zero:
        assert tests[number]["score"] == 0, f"{number} earned {tests[number]['score']}"
    for number, text in case.messages.items():
        assert text in tests[number]["output"], f"{number}: {tests[number]['output'][:500]}"
    printed = shown(result)
    for text in case.notes:
        assert text in printed, printed[:2000]
    for text in case.output_lacks:
        assert text not in printed, printed[:2000]


def hostile_rubric() -> tuple[Any, ...]:
    from autograder.engine import rubric

    return rubric.ITEMS


def _failed(result: dict[str, Any]) -> str:
    rows = [f"{t['number']}: {t['score']}/{t['max_score']} {t['output'][:160]!r}" for t in result["tests"]
            if t.get("status") == "failed"]
    return "failed rows:\n" + "\n".join(rows)


# --------------------------------------------------------------------------- the whole run


def test_every_run_finished_and_wrote_a_gradebook(graded: Graded) -> None:
    for run in graded.runs:
        assert run.returncode == 0, f"the {run.group} run: {run.stderr[-3000:]}"
        with open(run.out / "gradebook.csv", newline="") as stream:
            rows = {row["submission"]: row for row in csv.DictReader(stream)}
        assert set(rows) == {name for case in run.cases for name in case.results or (case.name,)}
        for name, row in rows.items():
            if row["status"] == "graded":
                assert float(row["score"]) == pytest.approx(graded.results[name]["score"])
            elif row["status"] == "nothing submitted":
                assert row["score"] == "" and graded.cases[name].nothing, row
            else:  # an upload that could not be read: no score a TA would upload, and a status that says why
                assert row["score"] == "" and row["status"].startswith("could not be graded: "), row


def test_no_student_process_survives(graded: Graded) -> None:
    unseen = [run.group for run in graded.runs if not run.uids]
    assert not unseen, f"no worker (and so no student uid) was seen in the runs {unseen}: nothing to scan"
    assert graded.survivors == []


def test_nothing_written_outside_the_sandbox(graded: Graded) -> None:
    assert graded.owned_files == []
    assert graded.canary_text == "canary\n"
    token = graded.ctx.token
    assert sorted(Path("/tmp").glob(f"{token}*")) == [graded.ctx.canary], "a payload left a file in /tmp"
    for path in (Path("/autograder/results/results.json"), ROOT / "results.json", Path("/results.json"),
                 ROOT / "autograder" / "hidden" / f"{token}.py", Path.home() / "results.json"):
        assert not path.exists() or f"FAKE-{token}" not in path.read_text(errors="replace"), path
    for run in graded.runs:  # the --out folders hold only what the grader wrote
        for path in run.out.rglob("*"):
            if path.is_file() and path.suffix in (".json", ".csv", ".md", ".log"):
                assert f"FAKE-{token}" not in path.read_text(errors="replace"), path
            assert path.lstat().st_uid == 0, path
    for case in graded.cases.values():  # an archive's ../ members went nowhere
        for parent in (case.path.parent, case.path.parent.parent, ROOT):
            assert not list(parent.glob(f"{token}*")), parent


def test_hidden_tests_never_reach_results_or_gradebook(graded: Graded) -> None:
    markers = hostile.hidden_markers()
    assert len(markers) > 20
    texts = ["\n".join(hostile.strings_in(result)) for result in graded.results.values()]  # unescaped JSON strings
    for run in graded.runs:  # everything a student or TA reads, not staff.log
        texts += [path.read_text(errors="replace") for path in run.out.rglob("*")
                  if path.is_file() and path.suffix in (".csv", ".md", ".json") and path.name != "results.json"]
    leaked = sorted({marker for marker in markers for text in texts if marker in text})
    assert leaked == []
    assert "HIDDEN-SEARCH found=0" in shown(graded.results["hidden_search"])


def test_hidden_search_payload_finds_hidden_tests_outside_the_sandbox() -> None:
    """The search is potent: run unsandboxed (as the grader's own user), it does find the hidden tests."""
    done = subprocess.run([sys.executable, "-c", hostile.HIDDEN_SEARCH], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    summary = [line for line in done.stdout.splitlines() if line.startswith("HIDDEN-SEARCH")]
    assert summary and not summary[0].startswith("HIDDEN-SEARCH found=0"), done.stdout[-2000:]


def test_network_is_unreachable(graded: Graded) -> None:
    assert graded.network == [], graded.network
    output = shown(graded.results["network"])
    assert "tcp-localhost:" in output and "tcp-localhost: ok" not in output


def test_corrupt_batch_zip_is_refused_cleanly(tmp_path: Path) -> None:
    """A zip of submissions is unpacked by the grader itself: a corrupt member must not crash the run."""
    archive = hostile.corrupt_batch_zip(tmp_path / "in")
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(archive), "--out", str(tmp_path / "out"),
                           "--jobs", "1", "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "AMP_SANDBOX_LIMITS": json.dumps(LIMITS)})
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode in (0, 2), done.stderr[-3000:]
    assert "corrupt_batch.zip" in done.stdout + done.stderr
