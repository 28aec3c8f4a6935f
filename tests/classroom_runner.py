"""Runs a GitHub Classroom workflow's steps, read from its YAML, in order, on this machine (no GitHub, no Docker).

What each kind of step does here is what it does on GitHub, as far as grading goes:

* ``actions/checkout``: the pushed repository is copied into a fresh workspace;
* ``actions/setup-python``: this interpreter's folder comes first on ``PATH`` (its version must be one the
  grader's pins hold on, 3.10 to 3.13);
* ``run:``: ``bash --noprofile --norc -eo pipefail`` in the workspace, as GitHub's runners do, with pip kept
  off every index (``PIP_NO_INDEX``): the template's requirements must already be what this environment holds;
  ``timeout-minutes`` applies; after a step fails, only steps with ``if: always()`` run; the ``key=value`` lines
  it appends to the file ``$GITHUB_OUTPUT`` names are its outputs (``steps.<id>.outputs.<key>``);
* ``classroom-resources/autograding-command-grader``: its ``src/main.js`` (v1, commit 7712c71) in Python: the
  setup command, then the command, in ``/bin/sh`` with only PATH, HOME and its fixed variables, the timeout in
  minutes; exit 0 gives ``max-score`` (``parseInt``), anything else 0; the result JSON, base64, is the step's
  ``result`` output;
* ``classroom-resources/autograding-grading-reporter``: its ``src/main.js`` and ``notify-classroom.js`` (v1,
  commit 43c2d9f): each runner's ``<ID>_RESULTS`` variable decoded, points and maximum summed over runners
  with a ``max_score``.

Expressions: ``${{ runner.temp }}`` and ``${{ steps.<id>.outputs.result }}``; any other one fails the run
(a workflow this runner does not understand is not proved by it).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
SUPPORTED_PYTHONS = ("3.10", "3.11", "3.12", "3.13")


@dataclass
class Run:
    points: float = 0
    max_points: float = 0
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # step name -> its result (the command grader's format)
    logs: dict[str, str] = field(default_factory=dict)  # step name -> what it printed
    order: list[str] = field(default_factory=list)  # step names as they ran
    failed: bool = False  # the reporter's verdict (some row failed or errored)
    step_failed: str = ""  # the first step that failed (the job fails; only ``if: always()`` steps run after it)


def _substitute(text: str, context: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        if expression not in context:
            raise AssertionError(f"the runner does not know the expression ${{{{ {expression} }}}}")
        return context[expression]
    return EXPRESSION.sub(value, str(text))


def _command_grader(inputs: dict[str, Any], workspace: Path, path: str, context: dict[str, str]) -> tuple[dict, str]:
    env = {"PATH": path, "FORCE_COLOR": "true", "DOTNET_CLI_HOME": "/tmp", "DOTNET_NOLOGO": "true",
           "HOME": os.environ.get("HOME", "/root")}
    timeout = float(inputs.get("timeout") or 10) * 60
    max_score = int(str(inputs.get("max-score") or 0).split(".")[0])  # parseInt
    log = ""
    started = time.monotonic()
    try:
        for key in ("setup-command", "command"):
            if inputs.get(key):
                done = subprocess.run(["/bin/sh", "-c", _substitute(inputs[key], context)], cwd=workspace, env=env,
                                      capture_output=True, text=True, timeout=timeout)
                log += done.stdout + done.stderr
                if done.returncode != 0:
                    raise subprocess.CalledProcessError(done.returncode, key)
        status, message = "pass", ""
    except subprocess.TimeoutExpired:
        status, message = "error", "Command timed out"
    except subprocess.CalledProcessError:
        status, message = "fail", "failed with exit code 1"
    name = inputs["test-name"]
    result = {"version": 1, "status": status, "max_score": max_score,
              "tests": [{"name": name, "status": status, "score": max_score if status == "pass" else 0,
                         "message": message, "test_code": inputs["command"], "filename": "", "line_no": 0,
                         "duration": int((time.monotonic() - started) * 1000)}]}
    return result, log


def run_workflow(workflow: Path, repository: Path, scratch: Path) -> Run:
    """Run the workflow's single job on a push of ``repository``; ``scratch`` holds the workspace and runner.temp."""
    spec = yaml.safe_load(workflow.read_text())
    (job,) = spec["jobs"].values()
    assert job.get("runs-on") == "ubuntu-latest"
    assert job.get("if") == "github.actor != 'github-classroom[bot]'"  # a student's push runs it
    workspace, temp = scratch / "workspace", scratch / "runner-temp"
    temp.mkdir(parents=True)
    context = {"runner.temp": str(temp)}
    path = os.environ.get("PATH", "/usr/bin:/bin")
    outcome = Run()
    for step in job["steps"]:
        name, uses, inputs = step.get("name", step.get("uses", "")), step.get("uses", ""), step.get("with", {}) or {}
        if outcome.step_failed and step.get("if") != "always()":
            continue
        assert step.get("if") in (None, "always()"), step
        outcome.order.append(name)
        if uses.startswith("actions/checkout@"):
            shutil.copytree(repository, workspace, ignore=shutil.ignore_patterns(".git"))
        elif uses.startswith("actions/setup-python@"):
            assert str(inputs["python-version"]) in SUPPORTED_PYTHONS, inputs
            path = f"{Path(sys.executable).parent}{os.pathsep}{path}"
        elif "run" in step:
            outputs = temp / f"output-{len(outcome.order)}"
            outputs.touch()
            env = {**os.environ, "PATH": path, "PIP_NO_INDEX": "1", "RUNNER_TEMP": str(temp), "GITHUB_OUTPUT": str(outputs)}
            timeout = float(step.get("timeout-minutes", 360)) * 60
            # Its own process group: a step cut short by its time limit loses every process it started, as on GitHub.
            process = subprocess.Popen(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                                        _substitute(step["run"], context)], cwd=workspace, env=env, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                outcome.logs[name] = process.communicate(timeout=timeout)[0]
                failed = process.returncode != 0
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                outcome.logs[name] = process.communicate()[0] + "\n(cancelled: timeout-minutes)"
                failed = True
            if failed:
                outcome.step_failed = outcome.step_failed or name
            for line in outputs.read_text(encoding="utf-8").splitlines():
                key, _, value = line.partition("=")
                context[f"steps.{step.get('id')}.outputs.{key}"] = value
                if key == "result":
                    outcome.rows[name] = json.loads(base64.b64decode(value))
        elif uses.startswith("classroom-resources/autograding-command-grader@"):
            result, outcome.logs[name] = _command_grader(inputs, workspace, path, context)
            context[f"steps.{step['id']}.outputs.result"] = base64.b64encode(json.dumps(result).encode()).decode()
            outcome.rows[name] = result
        elif uses.startswith("classroom-resources/autograding-grading-reporter@"):
            env = {key: _substitute(value, context) for key, value in (step.get("env") or {}).items()}
            for runner in str(inputs["runners"]).split(","):
                results = json.loads(base64.b64decode(env[f"{runner.strip().upper()}_RESULTS"]))
                if results.get("max_score"):
                    outcome.max_points += results["max_score"]
                    outcome.points += sum(test["score"] for test in results["tests"])
                outcome.failed |= results["status"] in ("fail", "error")
        else:
            raise AssertionError(f"the runner does not know the step {step!r}")
    return outcome
