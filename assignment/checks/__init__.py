"""The public checks of the mixed-precision homework (``python -m pytest`` in this folder runs them).

The folders say where their code runs, which is what decides whether it can be trusted:

* ``checks/student/``: only in the process that runs your files (it serves the checks' requests,
  and takes torch's GradScaler out of that process where ``loss_scaler.py`` runs);
* ``checks/judge/``: only in the checking process, never beside your code (the behaviours checked,
  the inputs tried, the expected values, the failure messages);
* ``checks/runners/``: plain data in, plain data out; run against your code in your process, and
  against torch's reference in the checking process.

The ``test_*.py`` files and ``plugin.py`` (pytest's side) run in the checking process too.
"""

from checks import arithmetic as _arithmetic

_arithmetic.pin()  # before anything computes: every check and grade on the same arithmetic (checks/arithmetic.py)
