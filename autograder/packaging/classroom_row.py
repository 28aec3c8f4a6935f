"""One public row of the GitHub Classroom workflow, read from the public checks' JUnit XML.

Shipped verbatim as ``.github/classroom/row.py`` in the template that ``make classroom`` writes (standard library
only: it runs in the student's repository, without the grader).  The workflow runs the public checks once per
push with ``--junitxml``; each row's step then runs ``python .github/classroom/row.py XML TEST``:

* through GitHub Classroom's command grader, which gives the row all its points when this exits 0 (every case
  of the test passed) and none otherwise;
* with ``--shares POINTS`` for a row whose cases share its points (a parametrized test, as the grader scores
  it): as a step of its own, which writes the command grader's result format to ``$GITHUB_OUTPUT`` (output
  ``result``) with one entry per case, each passed case worth ``POINTS / cases``, and exits 0.  The reporter
  adds up those entries, so a row whose cases partly pass gets its share, as in the TA batch.

What it prints (the failing cases' messages) is that step's log, which students read under the workflow run.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import xml.etree.ElementTree as ElementTree

MESSAGE_LIMIT = 4000
USAGE = "usage: row.py JUNIT_XML TEST_FUNCTION [--shares POINTS]"


def cases(xml_path: str, test: str) -> list[tuple[str, str, str | None]]:
    """(case name, its file, None if it passed else why not) for every case of ``test`` in the JUnit XML."""
    found = []
    for case in ElementTree.parse(xml_path).getroot().iter("testcase"):
        name = case.get("name", "")
        if name != test and not name.startswith(test + "["):
            continue
        where = case.get("classname", "").replace(".", "/") + ".py"
        problem = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        if problem is None:
            found.append((name, where, None))
        else:
            found.append((name, where, f"{problem.tag}: {problem.get('message') or ''}\n{problem.text or ''}".strip()))
    return found


def shares_result(found: list[tuple[str, str, str | None]], points: float) -> dict:
    """The command grader's result format for a row whose cases share ``points``: one entry per case, a passed
    case worth its share, a failed one 0 with the command that reruns it."""
    share = points / len(found) if found else 0.0
    tests = [{"name": name, "status": "pass" if why is None else "fail", "score": share if why is None else 0,
              "message": "" if why is None else why[:MESSAGE_LIMIT], "filename": where, "line_no": 0, "duration": 0,
              "test_code": "" if why is None else f'python -m pytest "{where}::{name}"'}
             for name, where, why in found]
    passed = bool(found) and all(why is None for _, _, why in found)
    return {"version": 1, "status": "pass" if passed else "fail", "max_score": points,
            "tests": tests or [{"name": "no results", "status": "fail", "score": 0, "message": "", "test_code": "",
                                "filename": "", "line_no": 0, "duration": 0}]}


def write_output(result: dict) -> None:
    """The step's ``result`` output, as the command grader sets it (base64 of the JSON)."""
    encoded = base64.b64encode(json.dumps(result).encode("utf-8")).decode("ascii")
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as stream:
        stream.write(f"result={encoded}\n")


def main(argv: list[str]) -> int:
    shares = None
    if len(argv) == 4 and argv[2] == "--shares":
        try:
            shares, argv = float(argv[3]), argv[:2]
        except ValueError:
            pass  # told by the usage line below
    if len(argv) != 2:
        print(USAGE, file=sys.stderr)
        return 2
    xml_path, test = argv
    try:
        found = cases(xml_path, test)
    except (OSError, ElementTree.ParseError) as exc:
        found = []
        print(f"The public checks left no results ({type(exc).__name__}): see the step 'Run the public checks'.")
    else:
        if not found:
            print(f"{test} did not run: see the step 'Run the public checks' (an import error in your files?).")
    failed = [(name, why) for name, _, why in found if why is not None]
    if found:
        print(f"{len(found) - len(failed)} of {len(found)} case(s) of {test} passed.")
    for name, why in failed:
        print(f"\n--- {name}\n{why[:MESSAGE_LIMIT]}")
    if shares is not None:
        write_output(shares_result(found, shares))
        return 0
    return 1 if failed or not found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
