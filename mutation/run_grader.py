"""Mutation score of the judge: mutate the grader's judging code, run the project's tests on each mutant.

    python mutation/run_grader.py [--out out/mutation-grader] [--per-file N] [--only NAME] [--fresh]
    make mutation-grader                # the same, with mutation/grader.toml's sample

``mutation/grader.toml`` names the judge-side files and, for each, the fast test files that
must fail when it is broken.  cosmic-ray enumerates their mutants (annotations and invalid
Python set aside as in run.py); a seeded sample of ``per_file`` mutants per file is judged.
A mutant is *killed* when its tests fail (or hang past ``timeout``), *survived* when they
pass; ``mutation/grader-equivalent.toml`` lists survivors that cannot change behaviour.

Each mutant's tests run in a scratch copy of the repository (OUT/tree) so the working tree is
never touched, and in a process forked from one that has already imported torch, hypothesis
and pytest: a mutant costs its tests, not another 5-20 s of imports.  The project's own
modules are never imported before the fork, so each child imports the mutated file afresh.
Verdicts are remembered in OUT/verdicts.json by the mutant's source, with a digest of the copied
tree (not its documentation): a rerun judges again only when the code or the tests changed, and
``--keep-killed`` (after adding tests, not changing them) judges again only the survivors.
Exit 1 below ``--fail-under`` or when a mutant could not be judged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from cosmic_ray.work_item import WorkItem

from mutants import ROOT, Mutant, enumerate_mutants, init_session, load_toml, record, report

CONFIG = ROOT / "mutation" / "grader.toml"
EQUIVALENT = ROOT / "mutation" / "grader-equivalent.toml"
PYTEST_ARGS = ["-x", "-q", "-rfE", "-p", "no:cacheprovider", "-p", "no:xdist", "-m", "not slow"]


def judge_config(config: dict[str, Any]) -> dict[str, list[str]]:
    """Mutated file -> ``always``'s tests then its own, with ``{checks}`` replaced by where the checks live.

    ``always`` first: they take seconds, and with ``-x`` a mutant they kill never waits for the rest."""
    return {path.format(checks=config["checks"]): [*config.get("always", []), *tests]
            for path, tests in config["files"].items()}


def write_cosmic_ray_config(paths: list[str], target: Path, timeout: float) -> None:
    """cosmic-ray only enumerates here: its test-command is never run (see module docstring)."""
    modules = ", ".join(json.dumps(p) for p in paths)
    target.write_text(f"[cosmic-ray]\nmodule-path = [{modules}]\nexcluded-modules = []\ntimeout = {timeout}\n"
                      f'test-command = "false"\n\n[cosmic-ray.distributor]\nname = "local"\n', encoding="utf-8")


def sampler(per_file: int | None, seed: int) -> Callable[[list[WorkItem]], list[WorkItem]]:
    """Up to ``per_file`` mutants of each file, drawn with a seed of its own (adding a file leaves
    the other files' samples as they were), kept in file and position order."""
    def pick(items: list[WorkItem]) -> list[WorkItem]:
        chosen: list[WorkItem] = []
        for path in sorted({str(w.mutations[0].module_path) for w in items}):
            of_file = [w for w in items if str(w.mutations[0].module_path) == path]
            if per_file is not None and per_file < len(of_file):
                rng = random.Random(f"{seed}:{Path(path).name}")
                of_file = [of_file[i] for i in sorted(rng.sample(range(len(of_file)), per_file))]
            chosen.extend(of_file)
        return chosen
    return pick


def copy_tree(tree: Path) -> str:
    """The working tree's files (tracked and untracked, not ignored) copied to ``tree``; a digest of the
    ones a verdict can depend on (not documentation or these runners)."""
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                            stdout=subprocess.PIPE).stdout.decode().split("\0")
    shutil.rmtree(tree, ignore_errors=True)
    digest = hashlib.sha256()
    for name in sorted(n for n in listed if n and (ROOT / n).is_file()):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tree / name)
        if not name.endswith(".md") and not name.startswith(("mutation/", "docs/")):
            digest.update(name.encode() + b"\0" + (ROOT / name).read_bytes())
    return digest.hexdigest()[:16]


def preload() -> None:
    """Import what every test run needs and no module of the project (children must import those afresh)."""
    import hypothesis  # noqa: F401
    import pytest  # noqa: F401
    import torch

    torch.set_num_threads(1)


def run_tests(tree: Path, tests: list[str], log: Path, timeout: float) -> tuple[str, str]:
    """Run ``tests`` in a child forked from this process; (verdict for a mutant, detail)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    pid = os.fork()
    if pid == 0:  # the child: its own session, so a hang can be killed with everything it started
        code = 3
        try:
            os.setsid()
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.chdir(tree)
            sys.path[:0] = [str(tree)]
            import pytest

            code = int(pytest.main([*PYTEST_ARGS, "--basetemp", str(log.parent / "pytest-tmp"), *tests]))
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "killed", f"timeout after {timeout:.0f} s"
        time.sleep(0.1)
    code = os.waitstatus_to_exitcode(status)
    failed = [line for line in log.read_text(errors="replace").splitlines() if line.startswith(("FAILED", "ERROR"))]
    if code == 0:
        return "survived", ""
    if code == 1 or failed:  # 1: tests failed; a mutant that breaks collection fails them too
        return "killed", "; ".join(failed)[:500] or f"pytest exit status {code}"
    return "errored", f"pytest exit status {code} (see {log})"


def judge_one(m: Mutant, tree: Path, tests: list[str], out: Path, timeout: float) -> None:
    target = tree / m.path
    original = target.read_bytes()
    target.write_text(m.source, encoding="utf-8")
    try:
        verdict, detail = run_tests(tree, tests, out / "logs" / f"{m.folder}.log", timeout)
    finally:
        target.write_bytes(original)
    m.verdict, m.detail = verdict, detail


def main(argv: list[str] | None = None) -> int:
    config = load_toml(CONFIG)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "mutation-grader")
    parser.add_argument("--per-file", type=int, default=config["per_file"],
                        help=f"mutants sampled per file (default {config['per_file']}; 0: all)")
    parser.add_argument("--only", action="append", default=[], help="only files whose name is NAME (repeatable)")
    parser.add_argument("--fresh", action="store_true", help="forget remembered verdicts")
    parser.add_argument("--keep-killed", action="store_true",
                        help="trust remembered kills although the tree changed (after adding tests only)")
    parser.add_argument("--fail-under", type=float, default=config["fail_under"], help="exit 1 below this score (%%)")
    args = parser.parse_args(argv)

    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    files = {p: t for p, t in judge_config(config).items() if not args.only or Path(p).name in args.only}
    session = out / "session.sqlite"
    write_cosmic_ray_config(list(files), out / "cosmic-ray.toml", config["timeout"])
    init_session(out / "cosmic-ray.toml", session, files)
    found = enumerate_mutants(session, files, sampler(args.per_file or None, config["seed"]))
    mutants = found.mutants
    tree_digest = copy_tree(out / "tree")
    memory_file = out / "verdicts.json"
    memory = {} if args.fresh or not memory_file.exists() else json.loads(memory_file.read_text())
    print(f"cosmic-ray: {found.total} mutants in {len(files)} files, {found.skipped} in annotations; "
          f"{args.per_file or 'all'} per file of the other {found.candidates} (seed {config['seed']}): "
          f"{found.invalid} not valid Python, judging {len(mutants)}", flush=True)

    preload()
    for tests in sorted({tuple(t) for t in files.values()}):  # each selection must pass unmutated
        began = time.monotonic()
        verdict, detail = run_tests(out / "tree", list(tests), out / "logs" / "baseline.log", config["timeout"])
        if verdict != "survived":
            print(f"baseline: {' '.join(tests)} fails without any mutant: {detail}; see {out / 'logs'}")
            return 2
        print(f"baseline passes in {time.monotonic() - began:.1f} s: {' '.join(tests)}", flush=True)
    for i, m in enumerate(mutants, 1):
        verdict, detail, judged_on = memory.get(m.folder, ("", "", ""))
        if judged_on == tree_digest or (verdict == "killed" and args.keep_killed):
            m.verdict, m.detail = verdict, detail
        else:
            judge_one(m, out / "tree", files[m.path], out, config["timeout"])
            memory[m.folder] = [m.verdict, m.detail, tree_digest]
            memory_file.write_text(json.dumps(memory, indent=0))
        print(f"[{i}/{len(mutants)}] {m.verdict:8} {m.path}:{m.line} {m.operator} #{m.occurrence}", flush=True)

    stale = record(session, mutants, load_toml(EQUIVALENT).get("mutant", []) if EQUIVALENT.exists() else [])
    (out / "mutants.json").write_text(json.dumps([m.summary() for m in mutants], indent=1))
    score = report(mutants, found, "mutation/grader-equivalent.toml", stale, len(mutants) < found.candidates,
                   time.monotonic() - started, f"{out / 'mutants.json'}, cr-report {session}")
    return 1 if any(m.verdict == "errored" for m in mutants) or score < args.fail_under else 0


if __name__ == "__main__":
    sys.exit(main())
