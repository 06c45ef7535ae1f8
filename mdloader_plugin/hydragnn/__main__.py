"""Entry of ``python -m mdloader_plugin.hydragnn``: the launcher, nothing else."""

import sys

from mdloader_plugin.integrations.hydragnn.upstream.launcher import main

sys.exit(main())
