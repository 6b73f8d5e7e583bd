"""``python -m guestcompute ...``: the same command line as ``guestcompute``."""
import sys

from .cli import main

sys.exit(main())
