"""`python -m mxsim`: the mxsim command line (mxsim.cli.main)."""

import sys

from .cli import main

sys.exit(main())
