"""auto's online trial on real ranks: probe both backends, decide identically everywhere, drop the
loser, and serve exactly the batches a single-backend loader serves; ``online_trial=False`` (or
its old name ``online_check=False``) keeps the model's pick."""

import numpy as np

from mdloader_plugin.records import codec
from mdloader_plugin.estimator.choose import Decision
from mdloader_plugin.estimator.online import OnlineTrial
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.sources import synth
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.store.shard import ShardStore
from mdloader_plugin.mpi.world import World
from checks import check

N, B = 300, 4
world = World.detect()
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
store = ShardStore.from_samples(world, synth.generate("hydragnn", 5, int(lo), int(hi)), N)
kw = dict(batch_size=B, seed=2, to_sample=codec.encode, collate=list)
auto = MDLoader(store, backend="auto", **kw)
# Predictions close enough that the model cannot skip the probe: the measurement decides.
auto._online.trial = OnlineTrial(Decision("onesided", {"onesided": 1e-3, "collective": 1.05e-3},
                                          "forced near-tie for the test"),
                                 window=4, recheck_after=4)
ref = MDLoader(store, backend="collective", **kw)
for epoch in range(2):
    auto.set_epoch(epoch)
    ref.set_epoch(epoch)
    got = [b"".join(r.tobytes() for r in batch) for batch in auto]
    want = [b"".join(r.tobytes() for r in batch) for batch in ref]
    check(got == want, f"epoch {epoch}: auto's batches differ from collective's")
# The loser is dropped at the step boundary after the decision (the same step on every rank);
# a decision reached in the last steps (a loaded machine probes longer) is applied by the next
# epoch's first step: serve one more epoch before looking.
auto.set_epoch(2)
for _ in auto:
    pass
res = auto._online.trial.result
check(res is not None and set(res.measured_s) == {"onesided", "collective"}, res)
check(list(auto._backends) == [res.backend], list(auto._backends))
check(len(set(world.comm.allgather(res.backend))) == 1, "ranks decided differently")
# The trial off, in either spelling (online_check: the old name, deprecated), is the model's pick
# alone, on every rank; the old spelling on, the trial runs as with the new one. Same batches.
for spelling in ({"online_trial": False}, {"online_check": False}, {"online_check": True}):
    with MDLoader(store, backend="auto", **kw, **spelling) as ld:
        on = next(iter(spelling.values()))
        check((ld._online is not None) == on, f"{spelling}: trial {ld._online}")
        ld.set_epoch(1)
        got = [b"".join(r.tobytes() for r in batch) for batch in ld]
        check(got == want, f"{spelling}: the batches differ from collective's (epoch 1)")
auto.close()
ref.close()
store.close()
if world.rank == 0:
    print(f"online switch ok: kept {res.backend} ({res.reason})", flush=True)
