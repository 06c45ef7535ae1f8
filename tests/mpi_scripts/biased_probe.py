"""The biased probe of issue 15, by injected timings on real ranks.

Both backends' ``fetch`` are wrapped to take a fixed time: one-sided 15 ms; collective 40 ms
alone but 4 ms while the one-sided backend's progress thread runs beside it (the effect measured
across hosts, exaggerated so load cannot blur it). The model's pick (one-sided, a near-tie so
the probe runs) is right. A probe that measures the collective beside the running thread sees it
4x faster and switches to it; one that probes each backend in the state it will run in keeps the
one-sided backend. Prints ``biased-probe: kept=<backend> coll_beside_thread=<n>/<steps>``.
Run with ``MDLOADER_PROGRESS_THREAD=1`` (one host has no thread otherwise) and
``MDLOADER_COLL_PROGRESS_THREAD=0``.
"""

import time

from mdloader_plugin.records import codec
from mdloader_plugin.estimator.choose import Decision
from mdloader_plugin.estimator.online import OnlineTrial
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.sources import synth
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.store.shard import ShardStore
from mdloader_plugin.mpi.world import World
from checks import check


N, B = 240, 4
world = World.detect()
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
store = ShardStore.from_samples(world, synth.generate("hydragnn", 5, int(lo), int(hi)), N)
auto = MDLoader(store, backend="auto", batch_size=B, seed=2, to_sample=codec.encode,
                collate=list, prefetch=0)
onesided = auto._backends["onesided"]
check(onesided._progress is not None, "run with MDLOADER_PROGRESS_THREAD=1")
seen = {"collective": [], "onesided": []}


def thread_running() -> bool:  # the one-sided backend holds the process's poller
    p = onesided._progress
    return p is not None and p.active and p.poller.running


def timed(backend, alone: float, beside: float):
    real = backend.fetch

    def fetch(plan):
        fetched = real(plan)  # a backend's first fetch takes the poller
        running = thread_running()
        seen[backend.name].append(running)
        time.sleep(beside if running and backend.name == "collective" else alone)
        return fetched
    backend.fetch = fetch


timed(onesided, 0.015, 0.015)
timed(auto._backends["collective"], 0.040, 0.004)
auto._online.trial = OnlineTrial(Decision("onesided", {"onesided": 1e-3, "collective": 1.05e-3},
                                          "forced near-tie for the test"),
                              window=4, recheck_after=6)
for epoch in range(3):
    auto.set_epoch(epoch)
    for _ in auto:
        pass
    if not auto._online.active:
        break
res = auto._online.trial.result
check(res is not None and auto._online.trial.done, "online trial did not finish")
check(len(set(world.comm.allgather(res.backend))) == 1, "ranks decided differently")
coll = seen["collective"]
if world.rank == 0:
    print(f"biased-probe: kept={res.backend} coll_beside_thread={sum(coll)}/{len(coll)} "
          f"onesided_with_thread={sum(seen['onesided'])}/{len(seen['onesided'])} "
          f"({res.reason})", flush=True)
auto.close()
store.close()
