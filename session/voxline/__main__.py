"""``python -m voxline``: the command line (the same as the ``voxline`` console script)."""

import sys

from voxline.session.cli import main

sys.exit(main())
