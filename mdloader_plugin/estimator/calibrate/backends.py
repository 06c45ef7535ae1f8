"""Stage 6: a few real steps of each backend: the per-step software intercept."""

from __future__ import annotations

import time

import numpy as np

from ..fit import positive
from ..models import Workload, get_model
from ..timing import SHARES, CalibrationSetup, StageClock
from ...backends import get_backend
from ...core.blocks import block_bounds
from ...store.shard import ShardStore
from .result import Result


# -- 6. real backends: the per-step software intercept -----------------------------------------
def measure_backends(world, setup: CalibrationSetup, res: Result) -> None:
    """Stage ``backends``: real one-sided and collective steps at batch 1 and 4 on a synthetic
    store; each backend's fixed step cost is what the other terms leave unexplained."""
    mean = 2048
    n = 64 * world.size
    store = ShardStore.from_records(world, [mean] * _block_len(n, world), _fill, n)
    rng = np.random.default_rng(7)
    try:
        for name, key in (("onesided", "os.t_step"), ("collective", "coll.t_step")):
            backend = get_backend(name)(store, world)
            excess = []
            for batch in (1, 4):
                share = setup.budget_s * SHARES["backends"] * setup.scale / 4
                clock = StageClock(world.comm, share)
                t = _time_backend(world, backend, rng, n, batch, setup.steps, clock)
                w = Workload(world.size, batch, mean, 0.0, int(np.bincount(world.node_of).max()))
                model = dict(get_model(name).terms(w, {**res.params, key: 0.0}))
                excess.append(t - sum(model.values()))
            backend.close()
            res.set(key, positive(float(np.median(excess)), 1e-6),
                    f"calibrate: real {name} steps at batch 1 and 4 minus the other terms")
    finally:
        store.close()


def _block_len(n: int, world) -> int:
    b = block_bounds(n, world.size)
    return int(b[world.rank + 1] - b[world.rank])


def _fill(buf: np.ndarray, offs: np.ndarray) -> None:
    buf[:] = 7


def _time_backend(world, backend, rng, n: int, batch: int, steps: int,
                  clock: StageClock) -> float:
    """Median step (max over ranks) of up to `steps` after a warm-up; at least 2, fewer than
    `steps` once `clock` is over its time."""
    times = []

    def one() -> float:
        table = world.comm.bcast(rng.permutation(n)[:world.size * batch].reshape(world.size, -1)
                                if world.rank == 0 else None, root=0)
        world.comm.Barrier()
        t = time.perf_counter()
        backend.fetch(table)
        return time.perf_counter() - t

    for i in range(steps + 1):
        times.append(clock.point(one))
        if i >= 2 and clock.over:
            break
    return float(np.median(times[1:]))
