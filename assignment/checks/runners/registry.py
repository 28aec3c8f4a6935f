"""The scenario registry: where every scenario runner registers itself, and where calls are dispatched.

A *scenario* is a named runner that takes plain data (``args``) and a submission and
returns plain data (see :mod:`checks.runners.harness`).  Runner modules (``harness``,
``probes``, ``gpu_runs``) register theirs when imported; whoever runs scenarios
(the sandbox's student process, the local ``student`` fixture) imports the runner
modules it needs and calls :func:`run`.  This module imports nothing of theirs, so no
runner module has to import another just to dispatch to it: the dependency points one
way, from each runner module to this registry.
"""

from __future__ import annotations

from typing import Any, Callable

Json = Any
Runner = Callable[[dict[str, Json], Any], Json]
FamilyRunner = Callable[[str, dict[str, Json], Any], Json]

_SCENARIOS: dict[str, Runner] = {}
_FAMILIES: dict[str, FamilyRunner] = {}


def register(name: str, runner: Runner) -> None:
    """Register ``runner`` for the scenario called ``name`` (a module imported again registers again)."""
    _SCENARIOS[name] = runner


def register_family(prefix: str, runner: FamilyRunner) -> None:
    """Register ``runner`` for every scenario whose name starts with ``prefix`` (it gets the name too)."""
    _FAMILIES[prefix] = runner


def registered(name: str) -> bool:
    return name in _SCENARIOS or any(name.startswith(prefix) for prefix in _FAMILIES)


def run(name: str, args: dict[str, Json], submission: Any) -> Json:
    """Run scenario ``name`` with ``args`` against ``submission`` (raises ValueError for an unknown name)."""
    if name in _SCENARIOS:
        return _SCENARIOS[name](args, submission)
    for prefix, runner in _FAMILIES.items():
        if name.startswith(prefix):
            return runner(name, args, submission)
    raise ValueError(f"unknown scenario {name!r} (is the module that defines it imported?)")
