"""Shared check: a rank's own step plans (sampling/planner.py) against the whole-world reference
(``sampling.reference.world_step``), every rank, step and epoch."""

import numpy as np

from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.sampling.planner import scan_sends
from mdloader_plugin.sampling.reference import world_step


def _check_all(core, epochs=(0, 1), group=None, num_ids=None):
    p = core.world_size
    w = p if group is None else group
    n_ids = core.num_ids if num_ids is None else num_ids
    bounds = block_bounds(n_ids, w)
    planners = []
    for rank in range(p):
        r0 = rank - rank % w
        g = rank - r0
        planners.append(core.planner(rank, int(bounds[g]), int(bounds[g + 1]), r0, w))
    checked = 0
    for epoch in epochs:
        for step in range(core.steps_in(epoch)):
            table = world_step(core, epoch, step)
            for rank, me in enumerate(planners):
                sp = me.step(epoch, step)
                assert np.array_equal(sp.ids, table[rank]), (epoch, step, rank)
                r0 = rank - rank % w
                want = scan_sends(table[r0:r0 + w], me.lo, me.hi)
                got = me.sends(epoch, step)
                assert np.array_equal(got[0], want[0]), (epoch, step, rank)
                assert np.array_equal(got[1], want[1]), (epoch, step, rank)
                checked += 1
    return checked
