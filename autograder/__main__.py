"""``python -m autograder``: see :mod:`autograder.cli`."""

import atexit
import os
import sys

from autograder.cli import main

status = main()
# No interpreter teardown: every output is written (files closed, workers stopped) when main returns.  What a normal
# exit does that can matter runs here: the exit functions (logging's flush, a temporary folder's cleanup) and the
# streams' flush.  Only the freeing of every module and object is skipped (numpy, rich, sqlite: a twenty-fifth of a
# second of one submission's grading), as the Gradescope entry point and the batch worker do.
atexit._run_exitfuncs()
try:
    sys.stdout.flush()
    sys.stderr.flush()
except (OSError, ValueError):  # a closed or broken pipe: the interpreter reports it and exits as it always did
    sys.exit(status)
os._exit(status)
