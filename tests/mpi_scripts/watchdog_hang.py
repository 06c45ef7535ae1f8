"""A fetch that never completes: the last rank's process stops before its first step.

Usage: watchdog_hang.py hang|off

``hang`` (run with ``MDLOADER_FETCH_TIMEOUT`` set): every rank but the last iterates; their
collective fetch waits for the last rank, which stops its own process (SIGSTOP: there, but no
sign of life, as a rank on a lost node), so the rank watching it must abort the job with one
line naming it and the ranks its fetch waited for. (A rank that merely sleeps is alive: the
watchdog leaves it alone, tests/mpi_scripts/watchdog_stall.py.) ``off``
(``MDLOADER_FETCH_TIMEOUT=0``): every rank runs one epoch and no watchdog thread is started.
"""

import os
import signal
import sys
import threading
import time

import numpy as np

from checks import check
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.mpi.world import World
from mdloader_plugin.store.shard import ShardStore

mode = sys.argv[1]
world = World.detect()
N = 60
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
samples = [{"sid": np.array([i]), "x": np.full((4, 2), i, np.float32)} for i in range(lo, hi)]
store = ShardStore.from_samples(world, samples, N)
loader = MDLoader(store, batch_size=4, backend="collective", prefetch=0, online_trial=False,
                  to_sample=lambda a: int(a["sid"][0]), collate=list)
if mode == "hang":
    if world.rank == world.size - 1:
        print(f"rank {world.rank}: not fetching", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
        time.sleep(120)
        print("the watchdog did not end the job", flush=True)
        sys.exit(5)
    for batch in loader:
        pass
    print(f"rank {world.rank}: outlived a fetch that cannot complete", flush=True)
    sys.exit(6)
else:
    seen = [s for batch in loader for s in batch]
    check(len(seen) == N // world.size, f"{len(seen)} samples, expected {N // world.size}")
    names = [t.name for t in threading.enumerate()]  # a watchdog runs from its first fetch on
    check("mdloader-watchdog" not in names, f"MDLOADER_FETCH_TIMEOUT=0 but threads: {names}")
    loader.close()
    store.close()
    if world.rank == 0:
        print("watchdog off ok", flush=True)
