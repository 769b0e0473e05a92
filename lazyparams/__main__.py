"""`python -m lazyparams`: the command line (see `lazyparams.cli`)."""

import sys

from lazyparams.cli import main

sys.exit(main())
