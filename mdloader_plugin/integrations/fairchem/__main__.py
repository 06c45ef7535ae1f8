"""``python -m mdloader_plugin.integrations.fairchem -c CONFIG [hydra overrides]`` under MPI."""

import sys

from .driver import main

sys.exit(main())
