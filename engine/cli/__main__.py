"""``python -m engine.cli``: the engine's commands without the installed entry point."""

import sys

from engine.cli import main

sys.exit(main())
