"""``python -m autograder.diagnosis``: see :mod:`autograder.diagnosis.cli`."""

import sys

from autograder.diagnosis.cli import main

if __name__ == "__main__":
    sys.exit(main())
