"""One public row of the GitHub Classroom workflow: passes when every case of its test passed.

Shipped verbatim as ``.github/classroom/row.py`` in the template that ``make classroom`` writes (standard library
only: it runs in the student's repository, without the grader).  The workflow runs the public checks once per
push with ``--junitxml``; each row's step then runs ``python .github/classroom/row.py XML TEST`` through GitHub
Classroom's command grader, which gives the row its points when this exits 0.  What it prints (the failing
cases' messages) is that step's log, which students read under the workflow run.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree

MESSAGE_LIMIT = 4000


def cases(xml_path: str, test: str) -> list[tuple[str, str | None]]:
    """(case name, None if it passed else why not) for every case of ``test`` in the JUnit XML."""
    found = []
    for case in ElementTree.parse(xml_path).getroot().iter("testcase"):
        name = case.get("name", "")
        if name != test and not name.startswith(test + "["):
            continue
        problem = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        if problem is None:
            found.append((name, None))
        else:
            found.append((name, f"{problem.tag}: {problem.get('message') or ''}\n{problem.text or ''}".strip()))
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: row.py JUNIT_XML TEST_FUNCTION", file=sys.stderr)
        return 2
    xml_path, test = argv
    try:
        found = cases(xml_path, test)
    except (OSError, ElementTree.ParseError) as exc:
        print(f"The public checks left no results ({type(exc).__name__}): see the step 'Run the public checks'.")
        return 1
    if not found:
        print(f"{test} did not run: see the step 'Run the public checks' (an import error in your files?).")
        return 1
    failed = [(name, why) for name, why in found if why is not None]
    print(f"{len(found) - len(failed)} of {len(found)} case(s) of {test} passed.")
    for name, why in failed:
        print(f"\n--- {name}\n{why[:MESSAGE_LIMIT]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
