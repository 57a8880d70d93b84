"""``python -m meanfield.cli``: the ``meanfield`` command."""

import sys

from .program import main

sys.exit(main())
