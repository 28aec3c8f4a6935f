"""What a GPU student process needs from the machine, found on the trusted side without touching CUDA.

* :func:`device_access`: what a GPU student process's view holds beyond a CPU one's
  (:mod:`autograder.sandbox.view`): the folders of ``LD_LIBRARY_PATH``, torch's own CUDA
  libraries -- the ``nvidia/`` pip packages next to torch --, the driver's library folders,
  the MPS pipe folder, and the ``/dev/nvidia*`` nodes; and the groups of those nodes that
  the unprivileged uid keeps;
* :func:`compute_modes`: each GPU's compute mode, read through NVML (which creates no
  CUDA context, so the grader never holds the device while a student process runs).

Nothing here imports torch's CUDA runtime; reading these facts cannot initialise CUDA.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from autograder.sandbox.view import within

#: NVML's compute modes (nvmlComputeMode_t).
COMPUTE_MODES = {0: "DEFAULT", 1: "EXCLUSIVE_THREAD", 2: "PROHIBITED", 3: "EXCLUSIVE_PROCESS"}
#: Modes in which only one process may hold a CUDA context at a time.
EXCLUSIVE = ("EXCLUSIVE_THREAD", "EXCLUSIVE_PROCESS")
DRIVER_LIBRARIES = ("libcuda.so.1", "libnvidia-ml.so.1")
DEFAULT_MPS_PIPE = "/tmp/nvidia-mps"
#: The persistence daemon's socket folder, which the driver's libraries may ask (kept where it exists).
PERSISTENCED = "/run/nvidia-persistenced"
#: The nodes every CUDA process opens: the control node, one per GPU, unified memory.  The rest
#: (``nvidia-caps/*``: MIG administration, ``nvidia-uvm-tools``, ``nvidia-modeset``) are the administrator's.
REQUIRED_NODE = re.compile(r"/dev/nvidia(ctl|-uvm|\d+)")


@dataclass
class AccessPlan:
    """The DeviceAccess fields, plus what was left out and why (for the preflight's report)."""

    keep: list[str] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # "path: why it stays out of the view"


def device_nodes(dev: str = "/dev") -> list[str]:
    """The NVIDIA device nodes (``nvidia0``, ``nvidiactl``, ``nvidia-uvm``, ``nvidia-caps/*``...)."""
    found = glob.glob(os.path.join(dev, "nvidia*")) + glob.glob(os.path.join(dev, "nvidia-caps", "*"))
    return sorted(path for path in found if not os.path.isdir(path))


def required(node: str) -> bool:
    """Whether a CUDA process must open ``node`` (see :data:`REQUIRED_NODE`)."""
    return REQUIRED_NODE.fullmatch(node) is not None


def node_groups(nodes: Iterable[str]) -> list[int]:
    """Gids the student uid must keep to open ``nodes``: the group of each node that others may not
    open read-write.  Never gid 0: membership of root's group opens far more than a GPU."""
    groups: set[int] = set()
    for node in nodes:
        try:
            info = os.stat(node)
        except OSError:
            continue
        others_rw = info.st_mode & (stat.S_IROTH | stat.S_IWOTH) == (stat.S_IROTH | stat.S_IWOTH)
        if not others_rw and info.st_gid != 0 and info.st_mode & stat.S_IRWXG:
            groups.add(info.st_gid)
    return sorted(groups)


def torch_library_folders() -> list[str]:
    """torch's own native libraries: ``torch/lib`` and every ``nvidia/*/lib`` pip package beside torch."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return []
    torch_dir = Path(spec.origin).parent
    folders = [torch_dir / "lib"] + sorted((torch_dir.parent / "nvidia").glob("*/lib"))
    folders += sorted(torch_dir.parent.glob("nvidia_*libs*"))  # other layouts of the same wheels
    return [str(folder) for folder in folders if folder.is_dir()]


def driver_library_folders() -> list[str]:
    """Folders of the driver's libraries, as the dynamic loader's cache lists them (``ldconfig -p``)."""
    try:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    folders = {os.path.dirname(line.rsplit("=>", 1)[1].strip()) for line in listing.splitlines()
               if "=>" in line and line.strip().split(" ", 1)[0] in DRIVER_LIBRARIES}
    return sorted(folders)


def plan_access(private: Sequence[str], env: dict[str, str] | None = None, dev: str = "/dev") -> AccessPlan:
    """Which folders to add to the view and which groups to keep, given the grader's ``private`` folders (its
    checkout, hidden tests, outputs: never in the view).  A top-level folder (``/tmp``, ``/home``...) is never
    added whole: it holds what is not CUDA's."""
    env = dict(os.environ if env is None else env)
    plan = AccessPlan()
    wanted = [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep)]
    wanted += torch_library_folders() + driver_library_folders()
    wanted += [env.get("CUDA_MPS_PIPE_DIRECTORY") or DEFAULT_MPS_PIPE, PERSISTENCED]
    private_real = [os.path.realpath(p) for p in private]
    # The interpreter's folders are visible to every student process anyway (a venv inside a checkout too).
    interpreter = [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)]
    for entry in wanted:
        if not entry:
            continue
        if not os.path.isabs(entry):
            plan.refused.append(f"{entry}: a relative folder (it would depend on the current directory)")
            continue
        real = os.path.realpath(entry)
        if not os.path.isdir(real) or real in plan.keep:
            continue
        if os.path.dirname(real) == "/" or real == "/":
            plan.refused.append(f"{entry}: a whole top-level folder")
        elif any(within(p, real) for p in private_real) or (
                any(within(real, p) for p in private_real) and not any(within(real, i) for i in interpreter)):
            plan.refused.append(f"{entry}: holds the grader's private files")
        else:
            plan.keep.append(real)
    plan.nodes = device_nodes(dev)
    plan.groups = node_groups(plan.nodes)
    return plan


def device_access(plan: AccessPlan) -> "object":
    """The sandbox's DeviceAccess for ``plan``."""
    from autograder.sandbox.runner import DeviceAccess

    return DeviceAccess(tuple(plan.keep), tuple(plan.groups), tuple(plan.nodes))


def folder_sizes(folders: Iterable[str]) -> dict[str, int]:
    """Number of entries of each folder, as the trusted side sees it (the student side must see as many)."""
    sizes = {}
    for folder in folders:
        try:
            sizes[folder] = len(os.listdir(folder))
        except OSError:
            continue
    return sizes


# --------------------------------------------------------------------------- NVML


def compute_modes() -> list[dict[str, object]] | None:
    """``[{"index", "uuid", "name", "mode"}]`` for every GPU through NVML, or None without NVML.

    NVML talks to the driver without creating a CUDA context (what ``nvidia-smi`` uses).
    """
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    init = getattr(nvml, "nvmlInit_v2", None) or nvml.nvmlInit
    if init() != 0:
        return None
    try:
        count = ctypes.c_uint(0)
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return None
        devices = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            if nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != 0:
                continue
            mode, name, uuid = ctypes.c_int(-1), ctypes.create_string_buffer(96), ctypes.create_string_buffer(96)
            nvml.nvmlDeviceGetComputeMode(handle, ctypes.byref(mode))
            nvml.nvmlDeviceGetName(handle, name, 96)
            nvml.nvmlDeviceGetUUID(handle, uuid, 96)
            devices.append({"index": index, "uuid": uuid.value.decode(errors="replace"),
                            "name": name.value.decode(errors="replace"),
                            "mode": COMPUTE_MODES.get(mode.value, f"unknown ({mode.value})")})
        return devices
    finally:
        nvml.nvmlShutdown()


def mode_of(devices: list[dict[str, object]] | None, uuid: str | None) -> str:
    """The compute mode of the GPU with ``uuid`` (torch's form, with or without "GPU-"); "unknown" if not found."""
    if not devices:
        return "unknown"
    wanted = (uuid or "").lower().removeprefix("gpu-")
    for device in devices:
        if wanted and str(device["uuid"]).lower().removeprefix("gpu-") == wanted:
            return str(device["mode"])
    modes = {str(device["mode"]) for device in devices}
    return modes.pop() if len(modes) == 1 else "unknown"
