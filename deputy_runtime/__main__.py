"""``python -m deputy_runtime`` runs the ``deputy-runtime`` command."""

import sys

from .cli import main

sys.exit(main())
