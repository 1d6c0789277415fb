"""``python -m voxline``: the command line (the same as the ``voxline`` console script)."""

import sys

from voxline.console import main

sys.exit(main())
