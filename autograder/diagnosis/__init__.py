"""Diagnosis: name the catalogued mistake a failing row's answers reveal, and the class report.

* :mod:`.table`: each catalogued bug's answers to the call plan's recorded calls (built, secret, shipped
  beside the plan);
* :mod:`.match`: a failing row whose answers equal exactly one bug's (or one group of twins) gets one
  feedback line in the student's words (:mod:`.words`), and results.json's ``extra_data`` names the bug;
* :mod:`.report`: the class report of a batch (report.html, items.csv, mistakes.csv).

Dependencies run one way: this package imports the engine; the engine calls back only through
:func:`autograder.diagnosis.match.annotate` (from :mod:`autograder.engine.results`).
"""
