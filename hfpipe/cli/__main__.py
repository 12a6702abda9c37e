"""`python -m hfpipe.cli`: the same as the `hfpipe` console script."""

import sys

from hfpipe.cli import main

sys.exit(main())
