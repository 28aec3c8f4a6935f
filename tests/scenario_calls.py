"""Print, as JSON, every scenario call the public + hidden suites make against the reference solution.

``python tests/scenario_calls.py [MODULE...]`` imports the named modules first (as an entry
point of the grader would), then runs both suites in this process through a runner that
records each call and answers it with the reference solution.  tests/test_isolation.py
compares the lists between the CLI's and Gradescope's sets of loaded modules.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "assignment")]


def main(preload: list[str]) -> None:
    for name in preload:
        importlib.import_module(name)
    from checks.plugin import LocalRunner

    from autograder.engine import judge, rubric

    calls: list[Any] = []

    class Recorder(LocalRunner):
        def run(self, scenario: str, args: dict[str, Any], *, timeout: float | None = None) -> Any:
            calls.append([scenario, args])
            return super().run(scenario, args, timeout=timeout)

    outcomes, _ = judge.run_suites(Recorder(ROOT / "solutions"), rubric.ITEMS)
    print(json.dumps({"calls": calls, "passed": sum(o.passed for o in outcomes), "cases": len(outcomes)},
                     default=repr))


if __name__ == "__main__":
    main(sys.argv[1:])
