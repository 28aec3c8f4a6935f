"""Diagnosis: name the catalogued mistake a failing row's answers reveal, and the class report.

* :mod:`.table`: each catalogued bug's answers to the call plan's recorded calls (built, secret, shipped
  beside the plan);
* :mod:`.match`: a failing row whose answers equal exactly one bug's (or one group of twins) gets one
  feedback line in the student's words (:mod:`.words`), and results.json's ``extra_data`` names the bug;
* :mod:`.report`: the class report of a batch (report.html, items.csv, mistakes.csv).

Use::

    python -m autograder.diagnosis build --out autograder/hidden/diagnosis.json   # the grader's table
    python -m autograder.diagnosis build --public --out assignment/checks/diagnosis.json   # the students' (make student)
    python -m autograder grade SUBMISSIONS --out OUT    # diagnoses with the table; writes OUT/report.html
    python -m autograder.diagnosis report OUT           # rewrite the class report only

Grading uses ``$AMP_DIAGNOSIS`` (a table's path, or "off"), else ``autograder/hidden/diagnosis.json``;
without a table nothing is diagnosed and grades are the same (a batch says so in one line, report.html too).
Tables are built from the code (the catalogue, the checks' scenarios, the hidden tests) and both are committed:
the grader's (``make diagnosis``; ``tests/test_diagnosis_checkout.py`` compares its ``source`` fingerprint with
the code) and the students' (``make student``; ``tests/test_release.py``).

Dependencies run one way: this package imports the engine, never the reverse.  Whoever writes
results.json (the batch worker, GPU grading) calls :func:`autograder.diagnosis.match.diagnosed_results`,
which finds the diagnosis and hands its lines to the engine's formatter as data.
"""
