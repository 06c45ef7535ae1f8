"""Both backends' small-step checks in one launch: onesided_small.py, then collective_small.py,
on the same ranks (each prints its ``<backend> small ok`` line on rank 0; a failed check aborts
the job naming its rank).

Usage: small_steps.py N"""

import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for script in ("onesided_small.py", "collective_small.py"):
    runpy.run_path(str(HERE / script), run_name="__main__")
    sys.stdout.flush()
