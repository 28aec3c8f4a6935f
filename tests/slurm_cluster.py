"""A throwaway single-node Slurm cluster for tests: munged, slurmctld and slurmd on localhost.

Needs root and Debian's ``slurm-wlm`` and ``munge`` packages (``.ci/run`` installs them where
it can).  Everything lives in one temporary folder (its own munge key and socket, state,
spool, logs, a small ``slurm.conf``), so the machine's own Slurm or munge setup, if any, is
not touched; clients find the cluster through ``SLURM_CONF``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "scontrol", "sacct")


def missing() -> str | None:
    """Why a cluster cannot be started here (None when it can)."""
    if os.geteuid() != 0:
        return "needs root (slurmd runs jobs as their user)"
    absent = [name for name in DAEMONS + CLIENTS[:3] if not (shutil.which(name) or Path(f"/usr/sbin/{name}").exists())]
    if absent:
        return f"{', '.join(absent)} not installed (Debian: apt-get install slurm-wlm munge)"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _binary(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass
class Cluster:
    root: Path
    memory_mb: int
    cpus: int
    env: dict[str, str] = field(default_factory=dict)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def log(self, name: str) -> str:
        try:
            return (self.root / f"{name}.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        subprocess.run([_binary("scancel"), "--user=root"], env=self.env, capture_output=True, timeout=30)
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def start(root: Path, memory_mb: int = 3000, cpus: int = 2) -> Cluster:
    """Start the three daemons (in the foreground of their own processes) and wait for an idle node."""
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    host = socket.gethostname().split(".")[0]
    key, sock = root / "munge.key", root / "munge.socket"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    for folder in ("state", "spool"):
        (root / folder).mkdir(exist_ok=True)
    conf = root / "slurm.conf"
    conf.write_text(f"""\
ClusterName=amptest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={root / 'state'}
SlurmdSpoolDir={root / 'spool'}
SlurmctldPidFile={root / 'slurmctld.pid'}
SlurmdPidFile={root / 'slurmd.pid'}
SlurmctldLogFile={root / 'slurmctld.log'}
SlurmdLogFile={root / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=amp Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    cluster = Cluster(root, memory_mb, cpus, env={**os.environ, "SLURM_CONF": str(conf)})
    commands = [
        [_binary("munged"), "--foreground", "--force", f"--key-file={key}", f"--socket={sock}",
         f"--pid-file={root / 'munged.pid'}", f"--log-file={root / 'munged.log'}", f"--seed-file={root / 'munge.seed'}"],
        [_binary("slurmctld"), "-D", "-i", "-f", str(conf)],
        [_binary("slurmd"), "-D", "-f", str(conf)],
    ]
    try:
        for command in commands:
            cluster.processes.append(subprocess.Popen(command, env=cluster.env, stdout=subprocess.DEVNULL,
                                                      stderr=open(root / f"{Path(command[0]).name}.err", "wb")))
            if Path(command[0]).name == "munged":
                _wait(lambda: sock.exists(), 20, "munged did not create its socket", cluster)
        _wait(lambda: _node_state(cluster) in {"idle", "mixed"}, 60, "the node did not become idle", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _node_state(cluster: Cluster) -> str:
    done = subprocess.run([_binary("sinfo"), "-h", "-o", "%T"], env=cluster.env, capture_output=True, text=True,
                          timeout=20)
    return done.stdout.strip().split("\n")[0].rstrip("*")


def _wait(ready: "callable[[], bool]", seconds: float, what: str, cluster: Cluster) -> None:  # type: ignore[valid-type]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in cluster.processes):
            break
        try:
            if ready():
                return
        except (OSError, subprocess.SubprocessError):
            pass
        time.sleep(0.5)
    errors = {name: (cluster.root / f"{name}.err").read_text(errors="replace")[-1500:] if
              (cluster.root / f"{name}.err").exists() else "" for name in DAEMONS}
    raise RuntimeError(f"{what}; logs: " + "; ".join(f"{n}: {cluster.log(n)[-1500:]} {errors[n]}" for n in DAEMONS))
