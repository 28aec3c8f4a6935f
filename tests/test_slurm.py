"""``--executor slurm`` on a real single-node Slurm cluster, and Slurm's refusals as one line.

The cluster tests (marked ``slurm``) start munged, slurmctld and slurmd on localhost in a
fixture (:mod:`slurm_cluster`), grade the bundled examples through it and compare with the
local gradebook; they skip, saying why, where the packages or root are missing.  The
refusal test also runs without Slurm: a stand-in ``sbatch`` refuses like the real one.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

import slurm_cluster
from autograder.batch.slurm_errors import rejection_message

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = [ROOT / "solutions", ROOT / "assignment", ROOT / "examples" / "partially_correct"]
REFUSAL = ("sbatch: error: Memory specification can not be satisfied\n"
           "sbatch: error: Batch job submission failed: Requested node configuration is not available")


def _grade(out: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autograder", "grade", *map(str, EXAMPLES), "--out", str(out),
                           *extra], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, **(env or {})})


def _gradebook(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as stream:
        return list(csv.DictReader(stream))


def test_rejection_message_names_the_option_to_change() -> None:
    parameters = {"mem_gb": 8.0, "cpus_per_task": 2, "timeout_min": 60, "slurm_partition": None}
    line = rejection_message(RuntimeError(REFUSAL), parameters)
    assert "\n" not in line and "8 GB memory" in line and "Memory specification can not be satisfied" in line
    assert line.endswith("change --slurm-mem-gb.")
    cpus = rejection_message(RuntimeError("sbatch: error: CPU count per node can not be satisfied"), parameters)
    assert cpus.endswith("change --slurm-cpus.")
    odd = rejection_message(RuntimeError("sbatch: error: something else"), {**parameters, "slurm_partition": "gpu"})
    assert "partition gpu" in odd and "--slurm-mem-gb, --slurm-cpus, --slurm-time and --slurm-partition" in odd


def test_a_refused_job_array_is_one_line_and_exit_2(tmp_path: Path) -> None:
    pytest.importorskip("submitit")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "sbatch"
    fake.write_text("#!/bin/sh\n" + "".join(f"echo '{line}' >&2\n" for line in REFUSAL.splitlines()) + "exit 1\n")
    fake.chmod(0o755)
    srun = bin_dir / "srun"  # submitit looks for srun before it submits anything (a machine without Slurm has none)
    srun.write_text("#!/bin/sh\nexit 0\n")
    srun.chmod(0o755)
    done = _grade(tmp_path / "out", "--executor", "slurm", "--slurm-mem-gb", "16", "--no-similarity",
                  env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 2, done.stderr
    assert len(refusal_lines(done.stderr)) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "16 GB memory" in done.stderr and "change --slurm-mem-gb" in done.stderr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[slurm_cluster.Cluster]:
    why = slurm_cluster.missing()
    if why:
        pytest.skip(f"no single-node Slurm cluster here: {why}")
    pytest.importorskip("submitit")
    started = slurm_cluster.start(tmp_path_factory.mktemp("slurm"), memory_mb=3000, cpus=2)
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.slurm
@pytest.mark.slow
def test_real_cluster_grades_like_the_local_executor(cluster: slurm_cluster.Cluster, tmp_path: Path) -> None:
    local = _grade(tmp_path / "local", "--jobs", "2")
    assert local.returncode == 0, local.stderr[-3000:]
    done = _grade(tmp_path / "slurm", "--executor", "slurm", "--slurm-mem-gb", "1", "--slurm-cpus", "1",
                  "--slurm-chunk", "2", "--slurm-poll", "1", "--slurm-time", "10", env=cluster.env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:] + cluster.log("slurmctld")
    assert "3 to grade on Slurm" in done.stdout
    assert _gradebook(tmp_path / "slurm" / "gradebook.csv") == _gradebook(tmp_path / "local" / "gradebook.csv")
    assert (tmp_path / "slurm" / "similarity.csv").read_bytes() == (tmp_path / "local" / "similarity.csv").read_bytes()
    assert "## Similarity" in (tmp_path / "slurm" / "summary.md").read_text()
    jobs = subprocess.run(["squeue", "-h"], env=cluster.env, capture_output=True, text=True, timeout=30)
    assert jobs.returncode == 0 and jobs.stdout.strip() == ""  # every array task finished


@pytest.mark.slurm
def test_real_cluster_refusal_is_one_line_and_exit_2(cluster: slurm_cluster.Cluster, tmp_path: Path) -> None:
    asked = str(cluster.memory_mb // 1024 * 4 + 4)  # more than the node has
    done = _grade(tmp_path / "out", "--executor", "slurm", "--slurm-mem-gb", asked, "--no-similarity",
                  env=cluster.env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(refusal_lines(done.stderr)) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{asked} GB memory" in done.stderr and "change --slurm-mem-gb" in done.stderr


def refusal_lines(stderr: str) -> list[str]:
    """stderr without the lines every batch reports first (autograder.batch.run): the isolation level, and the
    diagnosis when it is off (the tests turn it off) or stale."""
    return [line for line in stderr.splitlines() if not line.startswith(("isolation level", "diagnosis:"))]
