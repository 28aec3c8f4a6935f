"""One set of CPU kernels for the whole grading: the judge's.

torch chooses its CPU kernels once per process (``ATEN_CPU_CAPABILITY``, else the best the processor has).  Student
processes get a built environment, so without care the judge would compute its references with one set and the
student processes their answers with another, and a correct submission would differ from its own replay in the last
bits: grades would depend on a variable nobody looks at.  The zygote asks before it forks, so every student process
computes with the judge's kernels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT


def _capability_in_student_process(tmp_path: Path, capability: str) -> str:
    code = """
        import json, os, sys
        from pathlib import Path
        from autograder.engine import grader
        grader.start()
        from autograder.engine.sandbox import SandboxRunner
        runner = SandboxRunner(Path(sys.argv[1]))
        try:
            runner.begin_test("probe", public=True)
            runner.run("scaler_ops", {"world": {"optimizers": [{"groups": [[2]]}]}, "ops": [{"op": "new"}]})
        except Exception:
            pass
        finally:
            runner.close()
        print(json.dumps(runner.output_by_test()))
    """
    folder = tmp_path / "sub"
    folder.mkdir()
    for name in ("loss_scaler.py", "amp_step.py", "answers.py"):
        (folder / name).write_text((ROOT / "solutions" / name).read_text())
    with (folder / "loss_scaler.py").open("a") as stream:
        stream.write("\nimport torch as _t\nprint('KERNELS', _t.backends.cpu.get_cpu_capability())\n")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability}
    done = subprocess.run([sys.executable, "-c", "\n".join(line[8:] for line in code.splitlines()), str(folder)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = "".join(json.loads(done.stdout.strip().splitlines()[-1]).values())
    return next(line.split()[1] for line in printed.splitlines() if line.startswith("KERNELS"))


@pytest.mark.parametrize("capability", ["default", "avx2"])
def test_student_processes_compute_with_the_judges_kernels(tmp_path: Path, capability: str) -> None:
    assert _capability_in_student_process(tmp_path, capability) == capability.upper()
