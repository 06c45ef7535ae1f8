"""One progress poller a process, running only while a loader fetches.

Run on 2 ranks with ``MDLOADER_PROGRESS_THREAD=1 MDLOADER_COLL_PROGRESS_THREAD=1`` (progress
forced on one host). Three loaders: built, none polls; a training (one-sided) and a validation
(collective) loader iterated: one ``mdloader-progress`` thread in the process; a test loader
never iterated adds nothing; closing the two that fetched ends the thread.
"""

import threading

import numpy as np

from checks import check
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.mpi.world import World
from mdloader_plugin.store.shard import ShardStore


def pollers() -> int:
    return sum(t.name == "mdloader-progress" and t.is_alive() for t in threading.enumerate())


world = World.detect()
N = 40
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
samples = [{"sid": np.array([i]), "x": np.full((4, 2), i, np.float32)} for i in range(lo, hi)]
store = ShardStore.from_samples(world, samples, N)
kw = dict(batch_size=4, online_trial=False, to_sample=lambda a: int(a["sid"][0]), collate=list)
train = MDLoader(store, backend="onesided", name="train", **kw)
val = MDLoader(store, backend="collective", name="val", **kw)
test = MDLoader(store, backend="onesided", name="test", **kw)
check(pollers() == 0, f"{pollers()} progress threads before any fetch (idle loaders poll)")
for epoch in range(2):
    train.set_epoch(epoch)
    check(sum(len(b) for b in train) == N // world.size, "train: samples lost")
    check(pollers() == 1, f"{pollers()} progress threads while training")
    check(sum(len(b) for b in val) == N // world.size, "val: samples lost")
    check(pollers() == 1, f"{pollers()} progress threads with training and validation")
from mdloader_plugin.mpi.progress import POLLER  # noqa: E402 - after the thread counts

check(POLLER.started == 1 and POLLER.leases == 2, f"started {POLLER.started} threads, "
      f"{POLLER.leases} holders (train and val; the unused test loader holds none)")
train.close()
check(pollers() == 1, "closing one loader stopped the poller another holds")
val.close()
check(pollers() == 0 and POLLER.leases == 0, f"{pollers()} progress threads after close")
test.close()
store.close()
print(f"rank {world.rank}: one poller ok", flush=True)
